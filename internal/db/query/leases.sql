-- name: JoinFlushers :exec
-- JoinFlushers takes the shared member lock every flusher holds, so each can
-- count the flushers alive.
SELECT pg_advisory_lock_shared(@class::int, 0);

-- name: CountFlushers :one
-- CountFlushers counts the sessions holding the member lock of class in this
-- database.
SELECT count(*) FROM pg_catalog.pg_locks
WHERE locktype = 'advisory' AND classid = @class::oid AND objid = 0 AND objsubid = 2 AND granted
  AND database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database());

-- name: TryLockShard :one
-- TryLockShard takes a shard's lease if no other session holds it.
SELECT pg_try_advisory_lock(@class::int, @shard::int) AS taken;

-- name: UnlockShard :exec
-- UnlockShard gives a shard's lease up.
SELECT pg_advisory_unlock(@class::int, @shard::int);
