-- Idempotency keys of creates (migration 000012).

-- name: ClaimIdempotencyKey :execrows
-- ClaimIdempotencyKey records a key for the envelope being written, in that
-- envelope's transaction. A live row of the key (one not yet expired) is
-- left alone and 0 rows are reported: the key is taken. An expired one is
-- replaced. A row of the key still being written by another transaction is
-- waited for.
INSERT INTO idempotency_keys AS k (client_name, idem_key, request_sha256, envelope_id, created_at, expires_at)
VALUES (@client_name, @idem_key, @request_sha256, @envelope_id, @created_at, @expires_at)
ON CONFLICT (client_name, idem_key) DO UPDATE
    SET request_sha256 = excluded.request_sha256, envelope_id = excluded.envelope_id,
        created_at = excluded.created_at, expires_at = excluded.expires_at,
        response_status = NULL, response_body = NULL
    WHERE k.expires_at <= excluded.created_at;

-- name: LiveIdempotencyKey :one
-- LiveIdempotencyKey reads a key's row if it has not expired at @now.
SELECT request_sha256, envelope_id, response_status, response_body FROM idempotency_keys
WHERE client_name = @client_name AND idem_key = @idem_key AND expires_at > @now::timestamptz;

-- name: SaveIdempotentResponse :one
-- SaveIdempotentResponse records the answer to a key's create, unless one is
-- recorded already: either way it returns the recorded one, which every
-- repeat answers.
UPDATE idempotency_keys
SET response_status = coalesce(response_status, @response_status::integer),
    response_body = coalesce(response_body, @response_body::bytea)
WHERE client_name = @client_name AND idem_key = @idem_key AND envelope_id = @envelope_id
RETURNING response_status::integer AS status, response_body::bytea AS body;

-- name: PruneIdempotencyKeys :execrows
-- PruneIdempotencyKeys deletes up to @max_rows keys expired at @now. The
-- outer condition checks the expiry again: a create that took an expired
-- key over (ClaimIdempotencyKey) holds its row until it commits, and the
-- delete, having waited, rechecks only its own WHERE on the new version; a
-- key in use is skipped rather than waited for.
DELETE FROM idempotency_keys
WHERE (client_name, idem_key) IN (
    SELECT e.client_name, e.idem_key FROM idempotency_keys e
    WHERE e.expires_at <= @now::timestamptz ORDER BY e.expires_at LIMIT @max_rows::integer
    FOR UPDATE SKIP LOCKED)
  AND expires_at <= @now::timestamptz;
