-- The table golang-migrate keeps its version in (migrations/migrate.go). It
-- is created by the tool, not by a migration; sqlc reads it from here.
CREATE TABLE schema_migrations (
    version bigint  NOT NULL PRIMARY KEY,
    dirty   boolean NOT NULL
);
