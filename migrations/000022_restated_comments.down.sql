-- The comments as 000012 and 000016 wrote them.
COMMENT ON COLUMN idempotency_keys.client_name IS
    'The API key''s name that sent the create (GRABBER_AUTH=keys); '''' without API keys. Keys are scoped to it.';
COMMENT ON COLUMN packets.order_no IS 'The grab''s order number, yyyyMMdd + 10 digits, unique; NULL while unclaimed.';
COMMENT ON COLUMN service_settings.name IS 'The setting: redis_shards (how many Redis shards envelopes are spread over).';
