-- Claims appended, packets immutable. A claim used to be an UPDATE of its
-- packet row: not HOT (claimed_by, claimed_at and order_no are indexed), so
-- every claim wrote a new row version and an entry in each of the six
-- indexes of packets. Now a claim is a row of its own in claims, written by
-- the flusher with COPY (docs/scaling.md, "What the ledger needs to write
-- near the speed of COPY"), and the packet rows, in packet_pool, are only
-- written when the envelope is created and when settlement refunds them.
-- packets stays what DBAs query: a view with the columns it had.
--
-- Claims in flight (granted in Redis, not yet flushed) need nothing here:
-- the flusher after this migration writes them into claims, and a batch the
-- flusher before it had already written is refused by the primary key as a
-- replay and sent again guarded, which finds it applied. The migration runs
-- in one transaction and holds packets locked while it copies the claims
-- (docs/dba.md says what that means for a large ledger).

-- The views over packets are rebound (below) to the view that replaces it;
-- renaming first keeps their grants and comments.
ALTER TABLE packets RENAME TO packet_pool;
ALTER INDEX packets_pkey RENAME TO packet_pool_pkey;
ALTER TABLE packet_pool RENAME CONSTRAINT packets_amount_cents_check TO packet_pool_amount_cents_check;

CREATE TABLE claims (
    envelope_id  bigint      NOT NULL,
    packet_id    bigint      NOT NULL,
    user_id      text        NOT NULL,
    amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
    claimed_at   timestamptz NOT NULL,
    order_no     text
);

INSERT INTO claims (envelope_id, packet_id, user_id, amount_cents, claimed_at, order_no)
SELECT envelope_id, id, claimed_by, amount_cents, claimed_at, order_no FROM packet_pool
WHERE claimed_by IS NOT NULL
ORDER BY claimed_at, id;

-- The indexes after the rows: built once, not entry by entry.
-- The primary key also serves an envelope's claims in hand-out order
-- (descending packet id: the claims list) and the join from a packet.
ALTER TABLE claims ADD CONSTRAINT claims_pkey PRIMARY KEY (envelope_id, packet_id);
-- A user holds at most one packet per envelope.
ALTER TABLE claims ADD CONSTRAINT claims_envelope_user_key UNIQUE (envelope_id, user_id);
ALTER TABLE claims ADD CONSTRAINT claims_order_no_key UNIQUE (order_no);
CREATE INDEX claims_user_idx ON claims (user_id, claimed_at, packet_id);
-- Claims are appended about in claim-time order, so a BRIN index answers
-- "claims of a day" at a fraction of a B-tree's write cost. A range is
-- summarized once it fills (autosummarize); the newest, unsummarized one is
-- read whole, which a day's or an hour's query does not notice.
CREATE INDEX claims_claimed_at_idx ON claims USING brin (claimed_at) WITH (autosummarize = on);

COMMENT ON TABLE claims IS
    'One row per claimed packet: who grabbed it, when, under which order number. Appended by the flusher (COPY) in the transaction that adds the claims to envelopes.claimed_cents; never updated. Read it with its packet through the packets view.';
COMMENT ON COLUMN claims.envelope_id IS 'The envelope (envelopes.id) of the packet.';
COMMENT ON COLUMN claims.packet_id IS 'The packet (packet_pool.id).';
COMMENT ON COLUMN claims.amount_cents IS 'The packet''s amount, cents, as the grab was told it; the flusher writes a claim only when it equals packet_pool.amount_cents. Kept here so the reads of claims (an envelope''s, a user''s) need not join the packets.';
COMMENT ON COLUMN claims.user_id IS 'The user who grabbed it. A user holds at most one packet per envelope.';
COMMENT ON COLUMN claims.claimed_at IS 'When the grab was granted in Redis (UTC instant), not when the flusher wrote it.';
COMMENT ON COLUMN claims.order_no IS 'The grab''s order number, yyyyMMdd + 10 digits, unique; NULL only when it was lost to a conflict (claim_conflicts, order_no_in_use).';
COMMENT ON INDEX claims_user_idx IS
    'A user''s claims by (claimed_at, packet id): the user''s history, newest first.';
COMMENT ON INDEX claims_claimed_at_idx IS
    'Grabs by time: the day''s totals and biggest packets (docs/dba.md).';

CREATE VIEW packets AS
SELECT p.id, p.envelope_id, p.amount_cents, c.user_id AS claimed_by, c.claimed_at, c.order_no, p.refunded_at
FROM packet_pool p
LEFT JOIN claims c ON c.envelope_id = p.envelope_id AND c.packet_id = p.id;

COMMENT ON VIEW packets IS
    'One row per packet of an envelope: its amount, and who claimed it or when it was refunded (packet_pool joined with claims). Writable for repairs: an INSERT, UPDATE or DELETE here writes both tables.';
COMMENT ON COLUMN packets.id IS 'Packet id (from sequence_numbers ''packet'').';
COMMENT ON COLUMN packets.envelope_id IS 'Its envelope (envelopes.id; not a declared foreign key, for the speed of creation: flusher audit checks it).';
COMMENT ON COLUMN packets.amount_cents IS 'Its amount, cents, at least 1. Never changes.';
COMMENT ON COLUMN packets.claimed_by IS 'The user who grabbed it (claims.user_id); NULL while unclaimed. A user holds at most one packet per envelope.';
COMMENT ON COLUMN packets.claimed_at IS 'When the grab was granted in Redis (UTC instant), not when the flusher wrote it; NULL while unclaimed.';
COMMENT ON COLUMN packets.order_no IS 'The grab''s order number, yyyyMMdd + 10 digits, unique; NULL while unclaimed.';
COMMENT ON COLUMN packets.refunded_at IS 'When it was refunded to the sender at settlement (UTC instant); NULL unless refunded. Never set on a claimed packet.';

-- Writes through the view, for repairs and for scripts written against the
-- table it was (COPY packets FROM a retention archive among them). The
-- service writes packet_pool and claims itself.
CREATE FUNCTION packets_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM claims WHERE envelope_id = OLD.envelope_id AND packet_id = OLD.id;
        DELETE FROM packet_pool WHERE id = OLD.id;
        RETURN OLD;
    END IF;
    IF NEW.claimed_by IS NOT NULL AND NEW.refunded_at IS NOT NULL THEN
        RAISE check_violation USING MESSAGE = format('packet %s cannot be both claimed and refunded', NEW.id);
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO packet_pool (id, envelope_id, amount_cents, refunded_at)
        VALUES (NEW.id, NEW.envelope_id, NEW.amount_cents, NEW.refunded_at);
    ELSE
        DELETE FROM claims WHERE envelope_id = OLD.envelope_id AND packet_id = OLD.id;
        UPDATE packet_pool SET id = NEW.id, envelope_id = NEW.envelope_id, amount_cents = NEW.amount_cents,
            refunded_at = NEW.refunded_at
        WHERE id = OLD.id;
    END IF;
    IF NEW.claimed_by IS NOT NULL OR NEW.claimed_at IS NOT NULL OR NEW.order_no IS NOT NULL THEN
        INSERT INTO claims (envelope_id, packet_id, user_id, amount_cents, claimed_at, order_no)
        VALUES (NEW.envelope_id, NEW.id, NEW.claimed_by, NEW.amount_cents, NEW.claimed_at, NEW.order_no);
    END IF;
    RETURN NEW;
END $$;
COMMENT ON FUNCTION packets_write() IS
    'The packets view''s INSERT, UPDATE and DELETE: writes packet_pool and claims as the view shows them.';

CREATE TRIGGER packets_write INSTEAD OF INSERT OR UPDATE OR DELETE ON packets
    FOR EACH ROW EXECUTE FUNCTION packets_write();

-- The views that read packets, rebound to the view (the same text as
-- before; their columns do not change).
CREATE OR REPLACE VIEW envelope_totals AS
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

CREATE OR REPLACE VIEW user_grabs AS
SELECT p.claimed_by AS user_id,
       p.envelope_id,
       p.id         AS packet_id,
       p.amount_cents,
       p.order_no,
       p.claimed_at
FROM packets p
WHERE p.claimed_by IS NOT NULL;

CREATE OR REPLACE VIEW user_history AS
SELECT p.claimed_by   AS user_id,
       p.claimed_at,
       p.amount_cents,
       p.order_no,
       p.id           AS packet_id,
       p.envelope_id,
       e.sender_id,
       e.share_code,
       e.status       AS envelope_status
FROM packets p
JOIN envelopes e ON e.id = p.envelope_id
WHERE p.claimed_by IS NOT NULL;

CREATE OR REPLACE VIEW event_messages AS
SELECT e.id, e.type, e.envelope_id,
       CASE WHEN e.type IN ('envelope.sold_out', 'envelope.settled')
            THEN e.data || jsonb_build_object('best', best_claim_json(e.envelope_id))
            ELSE coalesce(e.data, jsonb_build_object('envelope_id', p.envelope_id, 'packet_id', p.id,
                'user_id', p.claimed_by, 'amount_cents', p.amount_cents, 'order_no', p.order_no,
                'grabbed_at', to_char(p.claimed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
       END || jsonb_build_object('metadata', coalesce(v.metadata, '{}'::jsonb)) AS data,
       e.created_at, e.delivered_at, e.attempts, e.next_attempt_at, e.last_error
FROM events e
LEFT JOIN packets p ON p.id = e.packet_id
LEFT JOIN envelopes v ON v.id = e.envelope_id;

-- CREATE OR REPLACE VIEW keeps the comments; they are stated again so the
-- query layer's generated models, which read the migrations, keep them too.
COMMENT ON VIEW envelope_totals IS
    'One row per envelope with its grabs counted from the packets themselves (not from envelopes.claimed_cents).';
COMMENT ON COLUMN envelope_totals.envelope_id IS 'envelopes.id.';
COMMENT ON COLUMN envelope_totals.sender_id IS 'envelopes.sender_id.';
COMMENT ON COLUMN envelope_totals.status IS 'envelopes.status.';
COMMENT ON COLUMN envelope_totals.count IS 'Packets it was split into.';
COMMENT ON COLUMN envelope_totals.total_cents IS 'Money put in, cents.';
COMMENT ON COLUMN envelope_totals.grabbed_count IS 'Packets claimed, counted in packets.';
COMMENT ON COLUMN envelope_totals.grabbed_cents IS 'Cents of the claimed packets, summed from packets.';
COMMENT ON COLUMN envelope_totals.remaining_count IS 'Packets not claimed (offered, or refunded once settled).';
COMMENT ON COLUMN envelope_totals.refunded_cents IS 'envelopes.refunded_cents: set at settlement.';
COMMENT ON COLUMN envelope_totals.created_at IS 'envelopes.created_at.';
COMMENT ON COLUMN envelope_totals.expires_at IS 'envelopes.expires_at.';
COMMENT ON COLUMN envelope_totals.settled_at IS 'envelopes.settled_at.';
COMMENT ON VIEW user_grabs IS 'Every grab of every user (one row per claimed packet); filter by user_id (indexed).';
COMMENT ON COLUMN user_grabs.user_id IS 'Who grabbed (packets.claimed_by).';
COMMENT ON COLUMN user_grabs.envelope_id IS 'The envelope.';
COMMENT ON COLUMN user_grabs.packet_id IS 'The packet.';
COMMENT ON COLUMN user_grabs.amount_cents IS 'What the user got, cents.';
COMMENT ON COLUMN user_grabs.order_no IS 'The grab''s order number.';
COMMENT ON COLUMN user_grabs.claimed_at IS 'When the grab was granted (UTC instant).';
COMMENT ON VIEW event_messages IS
    'Every event as the feed and the webhooks send it: a packet.claimed event''s data from its packet, the luckiest grab added to envelope.sold_out and envelope.settled, the envelope''s metadata added to every event.';
COMMENT ON COLUMN event_messages.id IS 'events.id: position in the feed.';
COMMENT ON COLUMN event_messages.type IS 'events.type.';
COMMENT ON COLUMN event_messages.envelope_id IS 'events.envelope_id.';
COMMENT ON COLUMN event_messages.data IS 'The event''s JSON data as sent.';
COMMENT ON COLUMN event_messages.created_at IS 'events.created_at.';
COMMENT ON COLUMN event_messages.delivered_at IS 'events.delivered_at: accepted by the webhook receiver.';
COMMENT ON COLUMN event_messages.attempts IS 'events.attempts: failed webhook deliveries.';
COMMENT ON COLUMN event_messages.next_attempt_at IS 'events.next_attempt_at.';
COMMENT ON COLUMN event_messages.last_error IS 'events.last_error.';
COMMENT ON VIEW user_history IS
    'Per user, every grab with its envelope (sender, share code, status); filter by user_id (indexed), newest first by claimed_at.';
COMMENT ON COLUMN user_history.user_id IS 'Who grabbed.';
COMMENT ON COLUMN user_history.claimed_at IS 'When the grab was granted (UTC instant).';
COMMENT ON COLUMN user_history.amount_cents IS 'What the user got, cents.';
COMMENT ON COLUMN user_history.order_no IS 'The grab''s order number.';
COMMENT ON COLUMN user_history.packet_id IS 'The packet.';
COMMENT ON COLUMN user_history.envelope_id IS 'The envelope.';
COMMENT ON COLUMN user_history.sender_id IS 'Who sent the envelope.';
COMMENT ON COLUMN user_history.share_code IS 'The envelope''s share code.';
COMMENT ON COLUMN user_history.envelope_status IS 'The envelope''s status now.';

-- What the pool no longer holds, once nothing reads it. Dropping a column
-- drops its indexes and constraints with it (the unique (envelope_id,
-- claimed_by) and order_no, the claimed and refunded checks, the claims
-- indexes of 000010 and 000014). A view of a DBA's own over these columns
-- stops the migration here, with nothing changed: redefine it over the
-- packets view first.
-- The dropped columns' bytes stay in the rows until they are rewritten
-- (VACUUM FULL, at a time of the DBA's choosing).
ALTER TABLE packet_pool DROP COLUMN claimed_by, DROP COLUMN claimed_at,
    DROP COLUMN order_no;
-- The unique (envelope_id, claimed_by) served "an envelope's packets".
CREATE INDEX packet_pool_envelope_idx ON packet_pool (envelope_id, id);

COMMENT ON TABLE packet_pool IS
    'One row per packet of an envelope: its amount, and when it was refunded. Written with the envelope (COPY); only refunded_at changes after, at settlement. Who claimed it is in claims; the packets view joins the two.';
COMMENT ON COLUMN packet_pool.refunded_at IS
    'When it was refunded to the sender at settlement (UTC instant); NULL unless refunded. Never set on a claimed packet.';
COMMENT ON INDEX packet_pool_envelope_idx IS
    'An envelope''s packets in id order: loading them into Redis, refunds, settlement sums.';
