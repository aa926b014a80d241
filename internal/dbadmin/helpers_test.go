package dbadmin_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/testenv"
)

// owner is a migrated database and a pool on it as the role that owns the
// tables (the one `flusher migrate` and `flusher dba` run as).
type owner struct {
	t    *testing.T
	pool *pgxpool.Pool
	url  string
}

func newOwner(t *testing.T) *owner {
	t.Helper()
	pool, u := testenv.Postgres(t)
	return &owner{t: t, pool: pool, url: u}
}

func (o *owner) exec(sql string, args ...any) {
	o.t.Helper()
	if _, err := o.pool.Exec(o.t.Context(), sql, args...); err != nil {
		o.t.Fatalf("%s: %v", sql, err)
	}
}

// newRole creates a login role named name (roles belong to the server, so
// the name is made unique) and drops it when the test ends. It returns a
// connection as that role.
func (o *owner) newRole(name string) *pgx.Conn {
	o.t.Helper()
	const password = "read-only-test"
	o.exec("CREATE ROLE " + pgx.Identifier{name}.Sanitize() + " LOGIN PASSWORD '" + password + "'")
	o.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// Its privileges here (default ones too) first, then the role.
		for _, stmt := range []string{"DROP OWNED BY ", "DROP ROLE "} {
			if _, err := o.pool.Exec(ctx, stmt+pgx.Identifier{name}.Sanitize()); err != nil {
				o.t.Logf("%s%s: %v", stmt, name, err)
			}
		}
	})
	u, err := url.Parse(o.url)
	if err != nil {
		o.t.Fatal(err)
	}
	u.User = url.UserPassword(name, password)
	c, err := pgx.Connect(o.t.Context(), u.String())
	if err != nil {
		o.t.Fatalf("connect as %s: %v", name, err)
	}
	o.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// relations lists the tables (kind "r", "p") and views ("v", "m") of the
// schema by name, from the catalog.
func (o *owner) relations() map[string]string {
	o.t.Helper()
	rows, err := o.pool.Query(o.t.Context(), `SELECT relname, relkind::text FROM pg_class
		WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p', 'v', 'm')`)
	if err != nil {
		o.t.Fatal(err)
	}
	out := map[string]string{}
	var name, kind string
	_, err = pgx.ForEachRow(rows, []any{&name, &kind}, func() error { out[name] = kind; return nil })
	if err != nil {
		o.t.Fatal(err)
	}
	if len(out) < 10 {
		o.t.Fatalf("only %d tables and views in the schema: %v", len(out), out)
	}
	return out
}

// denied reports that err is PostgreSQL's 42501 insufficient_privilege.
func denied(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// read selects from a relation as the connection's role.
func read(ctx context.Context, c *pgx.Conn, rel string) error {
	rows, err := c.Query(ctx, "SELECT * FROM "+pgx.Identifier{rel}.Sanitize()+" LIMIT 1")
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}
