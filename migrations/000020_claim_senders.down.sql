-- The packets view's writes as migration 16 made them, then the column goes:
-- a user's history reads every sender from the envelope again.
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
        INSERT INTO claims (envelope_id, packet_id, user_id, amount_cents, claimed_at, order_no)
        VALUES (NEW.envelope_id, NEW.id, NEW.claimed_by, NEW.amount_cents, NEW.claimed_at, NEW.order_no);
    END IF;
    RETURN NEW;
END $$;
ALTER TABLE claims DROP COLUMN sender_id;
