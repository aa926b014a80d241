package testenv

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// LimitedPool sets setting to value on the test's database at url, as a
// DBA would (ALTER DATABASE ... SET), through admin, and returns a pool of
// new sessions that start with it, closed when the test ends.
func LimitedPool(t testing.TB, admin *pgxpool.Pool, url, setting, value string) *pgxpool.Pool {
	t.Helper()
	var db string
	if err := admin.QueryRow(t.Context(), "SELECT current_database()").Scan(&db); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	sql := fmt.Sprintf("ALTER DATABASE %s SET %s = '%s'", pgx.Identifier{db}.Sanitize(),
		pgx.Identifier{setting}.Sanitize(), strings.ReplaceAll(value, "'", "''"))
	if _, err := admin.Exec(t.Context(), sql); err != nil {
		t.Fatalf("testenv: %s: %v", sql, err)
	}
	limited, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(limited.Close)
	return limited
}
