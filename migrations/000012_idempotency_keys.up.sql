-- Idempotency keys of envelope creates (the Idempotency-Key header of
-- POST /v1/envelopes). A key is written in the transaction that writes its
-- envelope, so a create that made an envelope always left its key, and two
-- creates with one key cannot both make one: the second waits on the first's
-- row of the primary key, then finds it. The answer is added once the
-- envelope is open; a repeat of the request answers it byte for byte.

CREATE TABLE idempotency_keys (
    client_name     text        NOT NULL,
    idem_key        text        NOT NULL CHECK (idem_key ~ '^[!-~]{1,255}$'),
    request_sha256  bytea       NOT NULL CHECK (octet_length(request_sha256) = 32),
    envelope_id     bigint      NOT NULL,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL CHECK (expires_at > created_at),
    response_status integer     CHECK (response_status BETWEEN 100 AND 599),
    response_body   bytea,
    CHECK ((response_status IS NULL) = (response_body IS NULL)),
    PRIMARY KEY (client_name, idem_key)
);

-- Expired keys are deleted a few at a time by the creates that follow.
CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);
COMMENT ON INDEX idempotency_keys_expires_at_idx IS 'Finds expired keys to delete.';

COMMENT ON TABLE idempotency_keys IS
    'One row per Idempotency-Key a create sent and the envelope it made; kept until expires_at (IDEMPOTENCY_TTL after the create).';
COMMENT ON COLUMN idempotency_keys.client_name IS
    'The API key''s name that sent the create (GRABBER_AUTH=keys); '''' without API keys. Keys are scoped to it.';
COMMENT ON COLUMN idempotency_keys.idem_key IS 'The Idempotency-Key header: 1 to 255 visible ASCII characters.';
COMMENT ON COLUMN idempotency_keys.request_sha256 IS
    'SHA-256 of the request body; a repeat with another body is refused (422 idempotency_mismatch).';
COMMENT ON COLUMN idempotency_keys.envelope_id IS 'The envelope the create made (envelopes.id).';
COMMENT ON COLUMN idempotency_keys.created_at IS 'When the create wrote its envelope, UTC.';
COMMENT ON COLUMN idempotency_keys.expires_at IS
    'When the key is forgotten, UTC: a later create with it makes a new envelope.';
COMMENT ON COLUMN idempotency_keys.response_status IS
    'HTTP status of the answer given; NULL until the envelope is open (a repeat meanwhile is 409 idempotency_in_progress).';
COMMENT ON COLUMN idempotency_keys.response_body IS
    'The answer''s body exactly as sent, replayed to repeats; NULL with response_status.';
