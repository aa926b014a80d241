package pgstore

import (
	"errors"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

func hasCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

func isUniqueViolation(err error) bool { return hasCode(err, pgerrcode.UniqueViolation) }
func isCheckViolation(err error) bool  { return hasCode(err, pgerrcode.CheckViolation) }
func isUndefinedTable(err error) bool  { return hasCode(err, pgerrcode.UndefinedTable) }

// hasConstraint reports a unique violation of the named constraint.
func hasConstraint(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == constraint
}

// IsRefused reports that PostgreSQL refused a statement's data (error
// classes 22, data exception, and 23, integrity constraint violation), as
// opposed to failing to run it: sending the same data again fails again.
func IsRefused(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return false
	}
	class := pgErr.Code[:2]
	return class == "22" || class == "23"
}

// NotCommitted reports an error of a transaction that certainly did not
// commit: PostgreSQL answered it (a failed statement, or a failed COMMIT,
// rolls the transaction back), or no connection was made to send it on. Any
// other failure (a connection lost, a context ended) may have come after
// the COMMIT reached the server. Not pgconn.SafeToRetry: pgx reports a
// COMMIT whose answer was lost as "conn closed", an error it deems safe to
// retry.
func NotCommitted(err error) bool {
	var pgErr *pgconn.PgError
	var connectErr *pgconn.ConnectError
	return errors.As(err, &pgErr) || errors.As(err, &connectErr)
}
