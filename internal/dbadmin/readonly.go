// Package dbadmin gives DBAs read access to the ledger: `flusher dba grant`
// and `flusher dba revoke` (docs/dba.md).
package dbadmin

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"redpacket/internal/db/dbsqlc"
)

// Why a role is refused.
var (
	// ErrNoSuchRole: the role does not exist; a DBA creates it first.
	ErrNoSuchRole = errors.New("no such role")
	// ErrOwnRole: the role is the one the command runs as, one it belongs
	// to, one owning the tables, or a superuser. Revoking would take the
	// service's own rights away; granting would grant nothing.
	ErrOwnRole = errors.New("refused: the service's own role, one it belongs to, one owning its tables, or a superuser")
)

// Grant gives role USAGE on the schema and SELECT on every table and view,
// now and (default privileges) on the tables the caller creates later: run it
// as the role that runs `flusher migrate`.
func Grant(ctx context.Context, db dbsqlc.DBTX, role string) error {
	return refused(role, "grant read access", dbsqlc.New(db).GrantReadOnly(ctx, role))
}

// Revoke takes back what Grant gave role, the default privileges included.
func Revoke(ctx context.Context, db dbsqlc.DBTX, role string) error {
	return refused(role, "revoke read access", dbsqlc.New(db).RevokeReadOnly(ctx, role))
}

// StillReads tells whether role reads the ledger after a Revoke: through a
// group it belongs to, or a grant a DBA made by hand, which Revoke leaves.
func StillReads(ctx context.Context, db dbsqlc.DBTX, role string) (bool, error) {
	reads, err := dbsqlc.New(db).RoleReadsLedger(ctx, role)
	if err != nil {
		return false, fmt.Errorf("check what role %q reads: %w", role, err)
	}
	return reads, nil
}

func refused(role, doing string, err error) error {
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UndefinedObject: // dba_check_role's (migration 000010)
		return fmt.Errorf("%s: %w: %q", doing, ErrNoSuchRole, role)
	case errors.As(err, &pgErr) && pgErr.Code == pgerrcode.InvalidParameterValue:
		return fmt.Errorf("%s: %w: %q", doing, ErrOwnRole, role)
	}
	return fmt.Errorf("%s to %q: %w", doing, role, err)
}
