-- name: SchemaVersion :one
-- SchemaVersion reads golang-migrate's record of the schema version.
SELECT version, dirty FROM schema_migrations LIMIT 1;

-- name: RedisShards :one
-- RedisShards reads the number of Redis shards every process must use.
SELECT value FROM service_settings WHERE name = 'redis_shards';

-- name: RecordServiceSetting :one
-- RecordServiceSetting records a setting the flushers record at start for
-- the operator commands that run without their settings (webhooks: 1 when
-- they send webhooks, else 0; events_retention_s: their EVENTS_RETENTION in
-- seconds), and returns what was recorded before (-1: nothing).
WITH prev AS (SELECT s.value FROM service_settings s WHERE s.name = sqlc.arg(setting)::text),
rec AS (
    INSERT INTO service_settings (name, value) VALUES (sqlc.arg(setting)::text, sqlc.arg(value)::bigint)
    ON CONFLICT (name) DO UPDATE SET value = excluded.value
    WHERE service_settings.value IS DISTINCT FROM excluded.value
)
SELECT coalesce((SELECT value FROM prev), -1)::bigint AS previous;

-- name: WebhooksRecorded :one
-- WebhooksRecorded is whether the flushers last recorded that they send
-- webhooks (false when none recorded anything).
SELECT coalesce(max(value), 0) = 1 AS webhooks FROM service_settings WHERE name = 'webhooks';

-- name: LockMigrations :exec
-- LockMigrations waits for the migration lock, a session advisory lock a
-- process holds while it applies migrations; it ends with the session.
SELECT pg_advisory_lock(sqlc.arg(lock_key)::bigint);

-- name: TryLockMigrations :one
-- TryLockMigrations takes the migration lock if nobody holds it.
SELECT pg_try_advisory_lock(sqlc.arg(lock_key)::bigint);

-- name: UnlockMigrations :exec
SELECT pg_advisory_unlock(sqlc.arg(lock_key)::bigint);

-- name: EventsRetentionRecorded :one
-- EventsRetentionRecorded is the EVENTS_RETENTION the flushers last
-- recorded, in seconds (0 when none recorded it).
SELECT coalesce(max(value), 0)::bigint AS seconds FROM service_settings WHERE name = 'events_retention_s';

-- name: SessionLockTimeout :exec
-- SessionLockTimeout sets how long each statement of the session waits on
-- a lock before failing with lock_not_available, in milliseconds (0: no
-- limit), for the rest of the session: the grabbers' pools set it on every
-- connection they open (pgstore.PoolConfig).
SELECT set_config('lock_timeout', @timeout::text, false);

-- name: SessionReadCommitted :exec
-- SessionReadCommitted makes the session's transactions READ COMMITTED
-- unless they ask for another level: what the service's statements are
-- written for (a database set to repeatable read or serializable by
-- default failed every pipelined claim chunk after the first, 40001, and
-- wrote them one by one). Every pool sets it on the connections it opens.
SELECT set_config('default_transaction_isolation', 'read committed', false);

-- name: LocalNoStatementTimeout :exec
-- LocalNoStatementTimeout lifts statement_timeout for the rest of the
-- transaction: a settlement or a retention batch does bounded work that
-- must finish, and one a DBA's statement_timeout cut off failed the same
-- way at every retry, holding its envelopes unsettled or the ledger growing.
SELECT set_config('statement_timeout', '0', true);

-- name: LocalIdleInTransactionTimeout :exec
-- LocalIdleInTransactionTimeout sets idle_in_transaction_session_timeout, in
-- milliseconds, for the rest of the transaction: a webhook delivery holds
-- its event's row lock while its request is in flight, and a shorter limit
-- set on the database ended the session before the receiver's answer was
-- recorded, so the event was sent again and again.
SELECT set_config('idle_in_transaction_session_timeout', @timeout::text, true);

-- name: LocalLockTimeout :exec
-- LocalLockTimeout bounds, for the rest of the transaction, how long a
-- statement of it waits on a lock (milliseconds, as text).
--
-- A claim transaction sets it (pgstore.copyLockTimeout): the flusher COPYs
-- the chunks of a batch on several connections at once, and a COPY waits
-- only on another transaction's uncommitted claim of the same packet, user
-- or order number (a Redis that lost state granted it twice) or on a lock a
-- DBA holds. An earlier chunk waiting on a later chunk's claim would wait for
-- ever, since the later chunk commits only after it: the timeout fails the
-- COPY instead, and the flusher applies the rest of the batch chunk by chunk,
-- guarded. The statement after the COPY keeps the bound: a claim write that
-- waits that long on an envelope's row, or on the event positions (the
-- 'event' sequence row every event writer holds until it commits: a commit
-- slower than the bound, a stalled disk), fails and is retried, and says why.
--
-- A settlement sets it too (pgstore.settleLockTimeout): behind a lock a DBA
-- holds it fails and is retried next round, rather than holding up the
-- flusher's one loop, claims included, for as long as the lock is held.
SELECT set_config('lock_timeout', @timeout::text, true);

-- name: RecordSharedSetting :many
-- RecordSharedSetting records a setting every process must share, unless
-- one is recorded already, and returns the one recorded: this process's, or
-- the first process's to compare with. None returned means another process
-- recorded it meanwhile (this statement's snapshot predates that row): ask
-- again.
WITH ins AS (
    INSERT INTO shared_settings (name, value, recorded_by) VALUES (@name, @value, @recorded_by)
    ON CONFLICT (name) DO NOTHING
    RETURNING value, recorded_at, recorded_by
)
SELECT value, recorded_at, recorded_by FROM ins
UNION ALL
SELECT s.value, s.recorded_at, s.recorded_by FROM shared_settings s
WHERE s.name = @name AND NOT EXISTS (SELECT 1 FROM ins);

-- name: LedgerID :one
-- LedgerID is this ledger's name (migration 27), which every process finds
-- or writes in its Redis under the key prefix.
SELECT value FROM shared_settings WHERE name = 'ledger_id';

-- name: UnfinishedOnOtherShards :one
-- UnfinishedOnOtherShards is the lowest id of an unfinished envelope whose
-- shard is not its id modulo the shard count (0 when none): redis_shards
-- was changed with envelopes live, whose state and queued grabs processes
-- would look for on another shard. The partial index of unfinished
-- envelopes bounds it.
SELECT coalesce(min(id), 0)::bigint AS id FROM envelopes
WHERE status IN ('loading', 'open', 'sold_out', 'expired', 'suspended') AND shard <> mod(id, @shards::int);

-- name: SharedSettings :many
-- SharedSettings are the settings every process must share, as recorded.
SELECT name, value, recorded_at, recorded_by FROM shared_settings WHERE name <> 'ledger_id' ORDER BY name;
