DROP TABLE IF EXISTS redis_epochs;
DROP INDEX IF EXISTS envelopes_created_at_idx;
ALTER TABLE envelopes DROP COLUMN IF EXISTS suspend_reason;
ALTER TABLE envelopes DROP COLUMN IF EXISTS suspended_at;
UPDATE envelopes SET status = 'settled' WHERE status = 'failed';
ALTER TABLE envelopes DROP CONSTRAINT envelopes_status_check;
ALTER TABLE envelopes ADD CONSTRAINT envelopes_status_check CHECK (status IN
    ('loading', 'open', 'sold_out', 'expired', 'settled', 'suspended'));
