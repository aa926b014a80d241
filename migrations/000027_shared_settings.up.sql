-- Settings the processes of one ledger must share, which service_settings
-- (numbers) cannot hold: REDIS_KEY_PREFIX (every process that uses Redis),
-- and the grabbers' ID_TIME_ZONE and ORDER_NO_WIDTH, as text. The first
-- daemon to start records what it uses; every later process compares, and
-- refuses to start on a difference: a grabber on another prefix than the
-- flushers strands its grabs where no flusher looks, a grabber in another
-- time zone counts a user's daily grabs and dates order numbers under
-- another day.
--
-- ledger_id names this ledger. Each process writes it into the Redis it was
-- given, under its prefix (one key per shard), or finds it there: a second
-- ledger (a staging database) on the same Redis and prefix would otherwise
-- hand out its envelopes' ids again over the first's live state, and pay
-- its users from them.
--
-- A new table and one row: nothing else is locked or rewritten.

CREATE TABLE shared_settings (
    name        text        PRIMARY KEY,
    value       text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    recorded_by text        NOT NULL
);
COMMENT ON TABLE shared_settings IS
    'Settings the processes of the ledger must share, recorded by the first daemon to start that uses each; later ones refuse to start on a difference. docs/dba.md, "Shared settings", says how to change one.';
COMMENT ON COLUMN shared_settings.name IS
    'ledger_id (this ledger''s name, written into Redis under the key prefix), redis_key_prefix, id_time_zone, order_no_width.';
COMMENT ON COLUMN shared_settings.value IS 'The value every process must be started with.';
COMMENT ON COLUMN shared_settings.recorded_at IS 'When it was recorded.';
COMMENT ON COLUMN shared_settings.recorded_by IS 'The program and host that recorded it (or the migration).';

INSERT INTO shared_settings (name, value, recorded_by)
VALUES ('ledger_id', gen_random_uuid()::text, 'migration 27');
