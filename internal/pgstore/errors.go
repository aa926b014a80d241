package pgstore

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// PostgreSQL error codes this package reacts to (Appendix A of the manual).
const (
	codeUniqueViolation = "23505"
	codeUndefinedTable  = "42P01"
)

func hasCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

func isUniqueViolation(err error) bool { return hasCode(err, codeUniqueViolation) }
func isUndefinedTable(err error) bool  { return hasCode(err, codeUndefinedTable) }

// hasConstraint reports a unique violation of the named constraint.
func hasConstraint(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeUniqueViolation && pgErr.ConstraintName == constraint
}
