DROP INDEX events_envelope_idx;
