-- Keys are named by their clients again (migration 000009's comment).
DROP TRIGGER api_keys_default_client ON api_keys;
DROP FUNCTION api_keys_default_client();
ALTER TABLE api_keys DROP COLUMN client;
COMMENT ON COLUMN api_keys.name IS
    'The client''s name, as the access log and `flusher apikey list` show it; unique among active keys.';
