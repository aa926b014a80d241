DROP INDEX envelopes_settled_at_idx;
DROP INDEX events_envelope_idx;
