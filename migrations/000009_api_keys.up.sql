-- Per-client API keys (GRABBER_AUTH=keys): operators create, list and revoke
-- them with `flusher apikey`; every grabber loads the active ones every
-- second, so a revoked key is refused within seconds, without a restart.
--
-- Only a SHA-256 of each key is kept. A key is 32 random bytes, so no
-- guessing can find one from its hash however fast the hash is; a slow
-- password hash (bcrypt) would add nothing but cost to every check, and its
-- salt would rule out finding a key by its hash.

CREATE TABLE api_keys (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL CHECK (name ~ '^[A-Za-z0-9_.:@-]{1,64}$'),
    key_hash     bytea       NOT NULL UNIQUE CHECK (octet_length(key_hash) = 32),
    scopes       text[]      NOT NULL CHECK (cardinality(scopes) > 0
                                 AND scopes <@ ARRAY['create', 'grab', 'read', 'events']::text[]),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz CHECK (revoked_at >= created_at)
);

-- A name names one active key: `flusher apikey revoke -name` is never
-- ambiguous. Revoked keys keep their names, for the record.
CREATE UNIQUE INDEX api_keys_active_name_idx ON api_keys (name) WHERE revoked_at IS NULL;
COMMENT ON INDEX api_keys_active_name_idx IS 'One active key per name.';

COMMENT ON TABLE api_keys IS
    'API keys of the clients of the grabber''s API (GRABBER_AUTH=keys); `flusher apikey create|list|revoke` manages them.';
COMMENT ON COLUMN api_keys.id IS 'Row id; nothing refers to it outside this table.';
COMMENT ON COLUMN api_keys.name IS
    'The client''s name, as the access log and `flusher apikey list` show it; unique among active keys.';
COMMENT ON COLUMN api_keys.key_hash IS
    'SHA-256 of the key (rpk_...). The key itself is shown once, by `flusher apikey create`, and kept nowhere.';
COMMENT ON COLUMN api_keys.scopes IS
    'What the key may do: create (create envelopes), grab (grab, short ids), read (status), events (the events feed).';
COMMENT ON COLUMN api_keys.created_at IS 'When the key was created.';
COMMENT ON COLUMN api_keys.last_used_at IS
    'When a grabber last accepted the key, to within about a minute (grabbers write it once a minute); NULL: never used.';
COMMENT ON COLUMN api_keys.revoked_at IS
    'When the key was revoked (grabbers refuse it within seconds); NULL while it is active.';
