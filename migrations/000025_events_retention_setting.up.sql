-- service_settings holds a third setting since this release:
-- events_retention_s, the flushers' EVENTS_RETENTION in seconds, which each
-- records at start, so that `flusher retention` run from cron without their
-- settings does not remove envelopes (and their events) that feed readers
-- are promised for longer.
--
-- A comment only: nothing is rewritten or scanned; COMMENT takes SHARE
-- UPDATE EXCLUSIVE on service_settings, and every read and write goes on.

COMMENT ON COLUMN service_settings.name IS
    'The setting: redis_shards (how many Redis shards envelopes are spread over); webhooks (1 when the flushers send webhooks, WEBHOOK_URL, else 0); events_retention_s (the flushers'' EVENTS_RETENTION in seconds). The last two are recorded by each flusher at start.';
