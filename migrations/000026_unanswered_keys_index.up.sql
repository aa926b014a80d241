-- Retention keeps an envelope while one of its idempotency keys is live with
-- no answer recorded (a create answered 503 "written but not opened", its
-- envelope opened later by the flusher's repair, and no repeat since): a
-- repeat of that create rebuilds its answer from the envelope, which must
-- still be there. This partial index finds such keys by envelope; it holds
-- only them, a few rows.
--
-- CREATE INDEX takes a SHARE lock on idempotency_keys while it builds: keyed
-- creates wait for it; the table holds only keys of the last IDEMPOTENCY_TTL.

CREATE INDEX idempotency_keys_unanswered_idx ON idempotency_keys (envelope_id) WHERE response_body IS NULL;
COMMENT ON INDEX idempotency_keys_unanswered_idx IS
    'Keys with no answer recorded, by envelope: retention keeps their envelopes until the keys expire.';
