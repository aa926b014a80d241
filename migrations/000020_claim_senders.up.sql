-- Each claim carries its envelope's sender. A user's history shows the
-- sender of every packet, and read from envelopes that is one more index
-- probe and heap page per claim, on envelopes a user grabbed far apart: at
-- 10M packets, 400 of a 100-claim page's 500 buffer reads and most of its
-- time, where the page of a small ledger merge-joined a few pages. Copied
-- onto the claim when the flusher writes it (an envelope's sender never
-- changes), the page reads the user index and the claims' rows only.
--
-- Claims written before this migration keep NULL: nothing is rewritten (an
-- UPDATE of every claim would write the table and its indexes again), and
-- the history reads their sender from the envelope as before. A flusher of
-- the version before, still running during a rolling upgrade, writes NULL
-- the same way, so the column takes NULL.
ALTER TABLE claims ADD COLUMN sender_id text;
COMMENT ON COLUMN claims.sender_id IS
    'The sender of the claim''s envelope (envelopes.sender_id), copied when the claim is written so a user''s history need not read the envelope; NULL on claims written before migration 20, whose envelope has it.';

-- Writes through the packets view fill it too (a retention archive loaded
-- back loads envelopes first).
CREATE OR REPLACE FUNCTION packets_write() RETURNS trigger LANGUAGE plpgsql AS $$
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
        INSERT INTO claims (envelope_id, packet_id, user_id, amount_cents, claimed_at, order_no, sender_id)
        VALUES (NEW.envelope_id, NEW.id, NEW.claimed_by, NEW.amount_cents, NEW.claimed_at, NEW.order_no,
                (SELECT e.sender_id FROM envelopes e WHERE e.id = NEW.envelope_id));
    END IF;
    RETURN NEW;
END $$;
