-- The packets users know: an envelope's kind (random or fixed amounts), its
-- designated recipients, a password, a greeting, the campaign's metadata, a
-- start time, and an early close by the sender.
--
-- Every new column has a constant default or none, so adding them rewrites
-- no row; the checks scan envelopes once. starts_at is NULL for an envelope
-- offered from its creation (every envelope before this migration).
--
-- envelope_kind gets its constraint only once the column is added, as in
-- 000007: PostgreSQL adds a column whose domain has a constraint by
-- rewriting the whole table (checking the value row by row) under its
-- exclusive lock, where a domain without one makes it a catalog change.
-- ALTER DOMAIN ... ADD CONSTRAINT then checks the stored values in one scan.

CREATE DOMAIN envelope_kind AS text;
COMMENT ON DOMAIN envelope_kind IS
    'How an envelope''s money is split: random (double-mean draws) or fixed (every packet total_cents / count).';

ALTER TABLE envelopes
    ADD COLUMN kind             envelope_kind NOT NULL DEFAULT 'random',
    ADD COLUMN recipients_count integer       NOT NULL DEFAULT 0 CHECK (recipients_count BETWEEN 0 AND 1000),
    ADD COLUMN password_digest  text          CHECK (password_digest ~ '^[0-9a-f]{64}$'),
    ADD COLUMN greeting         text          NOT NULL DEFAULT '' CHECK (char_length(greeting) <= 64),
    ADD COLUMN metadata         jsonb         NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    ADD COLUMN starts_at        timestamptz,
    ADD COLUMN closed_at        timestamptz;

ALTER DOMAIN envelope_kind ADD CONSTRAINT envelope_kind_check CHECK (VALUE IN ('random', 'fixed'));

COMMENT ON COLUMN envelopes.kind IS 'How the money was split: random or fixed; set at creation.';
COMMENT ON COLUMN envelopes.recipients_count IS
    'How many users may grab (rows of envelope_recipients); 0: anyone. Set at creation.';
COMMENT ON COLUMN envelopes.password_digest IS
    'Lowercase hex SHA-256 of "<envelope id>:<password>" when a grab must carry a password, else NULL. '
    'The password itself is stored nowhere.';
COMMENT ON COLUMN envelopes.greeting IS 'The sender''s greeting, up to 64 characters; empty when none.';
COMMENT ON COLUMN envelopes.metadata IS
    'The campaign''s string keys and values, up to 20; carried in every event of the envelope.';
COMMENT ON COLUMN envelopes.starts_at IS
    'UTC instant before which grabs are refused (not_started); NULL: offered from created_at. '
    'expires_at counts from it.';
COMMENT ON COLUMN envelopes.closed_at IS
    'UTC instant the sender closed the envelope early (POST .../close); expires_at was moved to it. NULL: never closed.';

CREATE TABLE envelope_recipients (
    envelope_id bigint NOT NULL REFERENCES envelopes (id),
    user_id     text   NOT NULL CHECK (user_id ~ '^[A-Za-z0-9_.:@-]{1,64}$'),
    PRIMARY KEY (envelope_id, user_id)
);
COMMENT ON TABLE envelope_recipients IS
    'The users who may grab an envelope with designated recipients, one row each; written with the envelope.';
COMMENT ON COLUMN envelope_recipients.envelope_id IS 'The envelope.';
COMMENT ON COLUMN envelope_recipients.user_id IS 'A user who may grab it.';

-- Every event carries its envelope's metadata, read from the envelope (it
-- never changes), so a backend can route events to its campaign.
CREATE OR REPLACE VIEW event_messages AS
SELECT e.id, e.type, e.envelope_id,
       coalesce(e.data, jsonb_build_object('envelope_id', p.envelope_id, 'packet_id', p.id,
           'user_id', p.claimed_by, 'amount_cents', p.amount_cents, 'order_no', p.order_no,
           'grabbed_at', to_char(p.claimed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
         || jsonb_build_object('metadata', coalesce(v.metadata, '{}'::jsonb)) AS data,
       e.created_at, e.delivered_at, e.attempts, e.next_attempt_at, e.last_error
FROM events e
LEFT JOIN packets p ON p.id = e.packet_id
LEFT JOIN envelopes v ON v.id = e.envelope_id;
