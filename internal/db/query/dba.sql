-- Read-only access for DBAs (migration 000010): `flusher dba grant|revoke`.
-- The role name is an identifier, so the statements live in SQL functions
-- that quote it with format('%I').

-- name: GrantReadOnly :exec
-- GrantReadOnly gives a role USAGE and SELECT on every table and view, and
-- on the tables the caller creates later.
SELECT dba_grant_read(@role_name::text);

-- name: RevokeReadOnly :exec
-- RevokeReadOnly takes back what GrantReadOnly gave.
SELECT dba_revoke_read(@role_name::text);

-- name: RoleReadsLedger :one
-- RoleReadsLedger tells whether a role still reads the ledger by any grant,
-- its own or one of a role it belongs to: USAGE on the schema and SELECT on
-- envelopes (what dba revoke takes back from the role itself).
SELECT (has_schema_privilege(@role_name::text, current_schema(), 'USAGE')
    AND has_table_privilege(@role_name::text, 'envelopes', 'SELECT'))::boolean AS reads;
