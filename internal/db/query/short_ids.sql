-- name: ShortIDOf :one
SELECT short_id FROM user_short_ids WHERE user_id = @user_id;

-- name: InsertShortID :execrows
-- InsertShortID records a user's short id unless the user or the id has a
-- row already.
INSERT INTO user_short_ids (user_id, short_id) VALUES (@user_id, @short_id)
ON CONFLICT DO NOTHING;

-- name: ShortIDConflicts :many
-- ShortIDConflicts tells which unique key an InsertShortID that did nothing
-- hit: the rows of the user and of the id.
SELECT user_id, short_id FROM user_short_ids WHERE user_id = @user_id OR short_id = @short_id;

-- name: ShortIDPage :many
-- ShortIDPage lists up to max_rows short ids above after and up to last, in
-- order (keyset pagination on the unique index).
SELECT short_id FROM user_short_ids
WHERE short_id > @after AND short_id <= @last ORDER BY short_id LIMIT @max_rows;
