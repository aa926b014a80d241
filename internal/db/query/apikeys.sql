-- API keys (migration 000009): the operator commands of `flusher apikey`,
-- and the grabbers' load of the active keys and their record of use.

-- name: CreateAPIKey :one
-- CreateAPIKey stores a new key's hash; a name already held by an active key
-- violates api_keys_active_name_idx.
INSERT INTO api_keys (name, client, key_hash, scopes) VALUES (@name, @client, @key_hash, @scopes::text[])
RETURNING created_at;

-- name: ListAPIKeys :many
-- ListAPIKeys lists the keys by name, the revoked ones too when include_revoked;
-- never their hashes.
SELECT name, client, scopes, created_at, last_used_at, revoked_at FROM api_keys
WHERE revoked_at IS NULL OR @include_revoked::boolean
ORDER BY name, created_at;

-- name: RevokeAPIKey :execrows
-- RevokeAPIKey revokes the active key of that name (0 rows: there is none).
UPDATE api_keys SET revoked_at = greatest(now(), created_at) WHERE name = @name AND revoked_at IS NULL;

-- name: ActiveAPIKeys :many
-- ActiveAPIKeys reads what a grabber needs to check keys: each active key's
-- hash, name, client and scopes.
SELECT key_hash, name, client, scopes FROM api_keys WHERE revoked_at IS NULL;

-- name: TouchAPIKeys :exec
-- TouchAPIKeys records when these keys were last used (a grabber sends the
-- keys it accepted since its last call, about a minute ago, each with the
-- time of a use): the time of the use, not of the write, which may come
-- long after (after a PostgreSQL outage, after the key was revoked). A
-- later use another grabber wrote already stays. The rows are locked in
-- key_hash order before any is updated (the count is a one-time filter,
-- run before the update's first row): grabbers writing overlapping keys at
-- once, each in the order its plan met them, could otherwise deadlock.
WITH locked AS MATERIALIZED (
    SELECT k.key_hash FROM api_keys AS k
    WHERE k.key_hash = ANY (@key_hashes::bytea[])
    ORDER BY k.key_hash
    FOR UPDATE
)
UPDATE api_keys AS k SET last_used_at = greatest(k.last_used_at, u.used_at)
FROM (SELECT unnest(@key_hashes::bytea[]) AS key_hash, unnest(@used_ats::timestamptz[]) AS used_at) AS u
WHERE k.key_hash = u.key_hash AND (SELECT count(*) FROM locked) >= 0;
