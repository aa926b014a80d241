-- Core schema: envelopes, their packets, and the database-locked sequence table.
-- Names are part of the product: DBAs query these tables and views directly.

CREATE TABLE sequence_numbers (
    key_name      text PRIMARY KEY,
    current_value bigint      NOT NULL CHECK (current_value >= 0),
    max_value     bigint      NOT NULL,
    step          integer     NOT NULL CHECK (step > 0),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CHECK (current_value <= max_value)
);

-- current_value is the last number handed out; ids stay below 2^53 so they are
-- exact as JSON numbers.
INSERT INTO sequence_numbers (key_name, current_value, max_value, step) VALUES
    ('envelope', 1000, 9007199254740991, 100),
    ('packet',   0,    9007199254740991, 100000);

-- Settings every process must agree on, read at start. redis_shards is the
-- number of Redis shards (consumed queues) envelopes are spread over; an
-- envelope's shard is its id modulo this number, so it never changes.
CREATE TABLE service_settings (
    name  text PRIMARY KEY,
    value bigint NOT NULL
);
INSERT INTO service_settings (name, value) VALUES ('redis_shards', 16);

CREATE TABLE envelopes (
    id             bigint      PRIMARY KEY,
    shard          smallint    NOT NULL CHECK (shard >= 0),
    share_code     text        UNIQUE,
    sender_id      text        NOT NULL,
    total_cents    bigint      NOT NULL CHECK (total_cents > 0),
    count          integer     NOT NULL CHECK (count > 0),
    status         text        NOT NULL CHECK (status IN
                       ('loading', 'open', 'sold_out', 'expired', 'settled', 'suspended')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    settled_at     timestamptz,
    -- claimed_cents is kept current by the flusher in the same transaction that
    -- claims the packets; refunded_cents is set at settlement.
    claimed_cents  bigint      NOT NULL DEFAULT 0 CHECK (claimed_cents >= 0),
    refunded_cents bigint      NOT NULL DEFAULT 0 CHECK (refunded_cents >= 0),
    CHECK (total_cents >= count),
    CHECK (claimed_cents + refunded_cents <= total_cents)
);

-- Work lists of the flusher: envelopes still to load, settle or watch.
CREATE INDEX envelopes_unsettled_idx ON envelopes (expires_at)
    WHERE status IN ('loading', 'open', 'sold_out', 'expired', 'suspended');
CREATE INDEX envelopes_sender_idx ON envelopes (sender_id, created_at);

CREATE TABLE packets (
    id           bigint      PRIMARY KEY,
    envelope_id  bigint      NOT NULL REFERENCES envelopes (id),
    amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
    claimed_by   text,
    claimed_at   timestamptz,
    order_no     text        UNIQUE,
    refunded_at  timestamptz,
    CHECK ((claimed_by IS NULL) = (claimed_at IS NULL)),
    CHECK (claimed_by IS NULL OR refunded_at IS NULL),
    -- A user holds at most one packet per envelope. The index also serves
    -- "all packets of an envelope" and "unclaimed packets of an envelope".
    CONSTRAINT packets_envelope_user_key UNIQUE (envelope_id, claimed_by)
);

-- "All grabs of a user".
CREATE INDEX packets_claimed_by_idx ON packets (claimed_by, claimed_at)
    WHERE claimed_by IS NOT NULL;

-- Claims the flusher could not apply without overwriting a different fact
-- (packet claimed by someone else, unknown packet, user already holding another
-- packet of the envelope). Kept for an operator; never applied automatically.
CREATE TABLE claim_conflicts (
    id          bigserial   PRIMARY KEY,
    envelope_id bigint      NOT NULL,
    packet_id   bigint      NOT NULL,
    user_id     text        NOT NULL,
    claimed_at  timestamptz NOT NULL,
    reason      text        NOT NULL,
    found_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (envelope_id, packet_id, user_id)
);

-- Per-envelope totals, from the packets themselves.
CREATE VIEW envelope_totals AS
SELECT e.id                                              AS envelope_id,
       e.sender_id,
       e.status,
       e.count,
       e.total_cents,
       count(p.claimed_by)                               AS grabbed_count,
       coalesce(sum(p.amount_cents) FILTER (WHERE p.claimed_by IS NOT NULL), 0)::bigint
                                                         AS grabbed_cents,
       e.count - count(p.claimed_by)                     AS remaining_count,
       e.refunded_cents,
       e.created_at,
       e.expires_at,
       e.settled_at
FROM envelopes e
LEFT JOIN packets p ON p.envelope_id = e.id
GROUP BY e.id;

-- Every grab of every user, newest first when ordered by claimed_at.
CREATE VIEW user_grabs AS
SELECT p.claimed_by AS user_id,
       p.envelope_id,
       p.id         AS packet_id,
       p.amount_cents,
       p.order_no,
       p.claimed_at
FROM packets p
WHERE p.claimed_by IS NOT NULL;
