-- A key belongs to a client, and a client may hold several keys at once: a
-- rotation makes the new key under a name of its own while the old one still
-- works. Until now a key's name was also its client's name, which is what
-- a create's idempotency key, the sender and user limits and the access log
-- are kept by, so the new key was a new client: a create retried with it
-- after a lost answer was not recognised and made a second envelope. The
-- client is a column of its own now, the key's name by default; the keys
-- made before keep their names as their clients, so nothing changes for
-- them.
ALTER TABLE api_keys ADD COLUMN client text;
UPDATE api_keys SET client = name;
ALTER TABLE api_keys ALTER COLUMN client SET NOT NULL,
    ADD CONSTRAINT api_keys_client_check CHECK (client ~ '^[A-Za-z0-9_.:@-]{1,64}$');

-- A key made without a client (by `flusher apikey create` of the version
-- before, which knows no column client) belongs to the client of its name,
-- as every key did until now; the NOT NULL is checked after this trigger.
CREATE FUNCTION api_keys_default_client() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.client := coalesce(NEW.client, NEW.name);
    RETURN NEW;
END
$$;
CREATE TRIGGER api_keys_default_client BEFORE INSERT ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_default_client();
COMMENT ON FUNCTION api_keys_default_client() IS
    'Trigger of api_keys: a key inserted without a client belongs to the client of its name.';

COMMENT ON COLUMN api_keys.client IS
    'The client the key belongs to (by default its name); several keys may share one. Idempotency keys, the sender and user limits and the access log are per client, so a rotated key keeps them.';
COMMENT ON COLUMN api_keys.name IS
    'The key''s name, as `flusher apikey list` shows it and `flusher apikey revoke -name` takes it; unique among active keys.';
