-- The comment of before 000025; the events_retention_s row, if recorded,
-- stays (nothing before this version reads it).
COMMENT ON COLUMN service_settings.name IS
    'The setting: redis_shards (how many Redis shards envelopes are spread over); webhooks (1 when the flushers send webhooks, WEBHOOK_URL, else 0; recorded by each flusher at start).';
