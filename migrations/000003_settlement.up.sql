-- Settlement, crash repair and Redis-loss handling.

-- failed: an envelope whose creation never finished and that was given up
-- (nothing was ever offered); all of its packets are refunded.
ALTER TABLE envelopes DROP CONSTRAINT envelopes_status_check;
ALTER TABLE envelopes ADD CONSTRAINT envelopes_status_check CHECK (status IN
    ('loading', 'open', 'sold_out', 'expired', 'settled', 'suspended', 'failed'));

-- Why and when an envelope was suspended (Redis lost state that may hold
-- grabs PostgreSQL has not seen); cleared when an operator recovers it.
ALTER TABLE envelopes ADD COLUMN suspended_at timestamptz;
ALTER TABLE envelopes ADD COLUMN suspend_reason text;

-- The audit's window: envelopes created recently.
CREATE INDEX envelopes_created_at_idx ON envelopes (created_at);

-- The token each Redis shard held when the flusher last checked it. Redis
-- keeps the same token in {<prefix>:s<shard>}:epoch; a shard whose token is
-- gone or different lost its data, so envelopes that lived there cannot be
-- trusted to Redis again without an operator.
CREATE TABLE redis_epochs (
    shard      smallint    PRIMARY KEY CHECK (shard >= 0),
    epoch      text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
