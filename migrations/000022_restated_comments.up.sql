-- Two column comments that no longer said what the column holds, restated.
--
-- idempotency_keys.client_name has held the client of the API key that sent
-- the create (api_keys.client) since 000021, not the key's name, so a create
-- retried with a rotated key of the same client finds its key. Rows written
-- before, or by a grabber of the version before, hold the key's name, which
-- was its client (000021 made every existing key's name its client).
--
-- packets.order_no (the view, claims.order_no) is NULL on a claimed packet
-- too, when its order number was lost to a conflict (claim_conflicts,
-- order_no_in_use), as claims.order_no's comment says.
--
-- service_settings holds a second setting since this release: webhooks,
-- which the flushers record at start, so that an operator command run
-- without their settings (flusher retention from cron) knows they send
-- webhooks.
--
-- Comments only: nothing is rewritten or scanned, and the locks taken (SHARE
-- UPDATE EXCLUSIVE on idempotency_keys, service_settings and the packets
-- view) let every read and write go on.

COMMENT ON COLUMN idempotency_keys.client_name IS
    'The client of the API key that sent the create (api_keys.client; GRABBER_AUTH=keys); '''' without API keys. Keys are scoped to it, so a rotated key of the same client finds them.';
COMMENT ON COLUMN packets.order_no IS
    'The grab''s order number (claims.order_no), yyyyMMdd + 10 digits, unique; NULL while unclaimed, and on a claim whose order number was lost to a conflict (claim_conflicts, order_no_in_use).';
COMMENT ON COLUMN service_settings.name IS
    'The setting: redis_shards (how many Redis shards envelopes are spread over); webhooks (1 when the flushers send webhooks, WEBHOOK_URL, else 0; recorded by each flusher at start).';
