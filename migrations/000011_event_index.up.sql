-- Indexes for the queries the README gives DBAs (readme_queries_test.go runs
-- EXPLAIN on each). Without them, one envelope's events read all of events,
-- and (before 000010) the day's settlements all of envelopes.

-- "One envelope's events in order" (event_messages WHERE envelope_id = ...
-- ORDER BY id): events_pending_idx holds only undelivered events.
CREATE INDEX events_envelope_idx ON events (envelope_id, id);
COMMENT ON INDEX events_envelope_idx IS
    'One envelope''s events in order, delivered or not (the README''s event_messages query).';

-- "Settled since" (envelopes WHERE settled_at > ...) uses
-- envelopes_settled_at_idx of migration 000010.
