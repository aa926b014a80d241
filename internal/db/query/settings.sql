-- name: SchemaVersion :one
-- SchemaVersion reads golang-migrate's record of the schema version.
SELECT version, dirty FROM schema_migrations LIMIT 1;

-- name: RedisShards :one
-- RedisShards reads the number of Redis shards every process must use.
SELECT value FROM service_settings WHERE name = 'redis_shards';
