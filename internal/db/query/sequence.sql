-- name: LockSequence :one
-- LockSequence locks a key's row of sequence_numbers for a reservation.
SELECT current_value, max_value, step FROM sequence_numbers WHERE key_name = @key_name FOR UPDATE;

-- name: AdvanceSequence :exec
UPDATE sequence_numbers SET current_value = @current_value, updated_at = now() WHERE key_name = @key_name;
