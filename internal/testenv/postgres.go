package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"redpacket/internal/testenv/throwaway"
	"redpacket/migrations"
)

var (
	pgServer server
	// tmpl remembers the template database's name, or the error of making it.
	tmpl struct {
		sync.Mutex
		done bool
		name string
		err  error
	}
)

// PostgresURL returns the URL of a new database holding the current schema,
// dropped when the test ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	admin := pgServer.get(t, []string{"TEST_DATABASE_URL", "DATABASE_URL"}, startPostgres)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tmplName, err := template(ctx, admin)
	if err != nil {
		t.Fatalf("testenv: make template database: %v", err)
	}
	name := Name("rp_t_")
	err = withAdmin(ctx, admin, func(c *pgx.Conn) error { return cloneDatabase(ctx, c, tmplName, name) })
	if isMissingDatabase(err) {
		// A test process of another schema (another checkout sharing the
		// server) dropped this template as stale: build it again.
		if tmplName, err = rebuildTemplate(ctx, admin); err == nil {
			err = withAdmin(ctx, admin, func(c *pgx.Conn) error { return cloneDatabase(ctx, c, tmplName, name) })
		}
	}
	if err != nil {
		t.Fatalf("testenv: create test database: %v", err)
	}
	t.Cleanup(func() { dropDatabase(t, admin, name) })
	return withDatabase(admin, name)
}

// Postgres returns a pool on a new database (see PostgresURL), closed when the
// test ends.
func Postgres(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	u := PostgresURL(t)
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatalf("testenv: connect: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, u
}

func startPostgres(ctx context.Context) (string, error) {
	return containerOrLocal(ctx, postgresContainer, throwaway.StartPostgres)
}

func postgresContainer(ctx context.Context) (string, error) {
	c, err := tcpostgres.Run(ctx, "postgres:15-alpine",
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies())
	if err != nil {
		return "", fmt.Errorf("start PostgreSQL container: %w", err)
	}
	return c.ConnectionString(ctx, "sslmode=disable")
}

// template returns the name of a database migrated to the embedded schema. Its
// name carries a hash of the migrations, so a changed schema gets a new one and
// an unchanged one is reused across test processes and runs.
func template(ctx context.Context, admin string) (string, error) {
	tmpl.Lock()
	defer tmpl.Unlock()
	if tmpl.done {
		return tmpl.name, tmpl.err
	}
	name, err := migrationsHash()
	if err == nil {
		name = "rp_tmpl_" + name
		err = withAdmin(ctx, admin, func(c *pgx.Conn) error { return ensureTemplate(ctx, c, admin, name) })
	}
	tmpl.done, tmpl.name, tmpl.err = true, name, err
	return name, err
}

// rebuildTemplate forgets the template made before and makes it again.
func rebuildTemplate(ctx context.Context, admin string) (string, error) {
	tmpl.Lock()
	tmpl.done = false
	tmpl.Unlock()
	return template(ctx, admin)
}

// isMissingDatabase reports whether err is PostgreSQL's 3D000
// (invalid_catalog_name): the database named does not exist.
func isMissingDatabase(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "3D000"
}

func ensureTemplate(ctx context.Context, c *pgx.Conn, admin, name string) error {
	// Test processes of several packages start at once: one builds, the others wait.
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock(7262020)"); err != nil {
		return err
	}
	defer c.Exec(context.Background(), "SELECT pg_advisory_unlock(7262020)") //nolint:errcheck
	var exists bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil || exists {
		return err
	}
	// Build under a scratch name and rename when complete, so a crash half-way
	// never leaves a template that looks finished.
	scratch := Name(name + "_b")
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{scratch}.Sanitize()); err != nil {
		return err
	}
	if err := migrations.Up(withDatabase(admin, scratch)); err != nil {
		return err
	}
	_, err := c.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{scratch}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize())
	if err == nil {
		dropStaleTemplates(ctx, c, name)
	}
	return err
}

// dropStaleTemplates removes templates of earlier schemas, so a server shared
// across many runs does not collect them. One still being cloned is in use
// and stays (the drop fails); a later run removes it.
func dropStaleTemplates(ctx context.Context, c *pgx.Conn, current string) {
	rows, err := c.Query(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'rp\_tmpl\_%' AND datname <> $1`, current)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, n := range names {
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n}.Sanitize())
	}
}

func cloneDatabase(ctx context.Context, c *pgx.Conn, tmpl, name string) error {
	for attempt := 0; ; attempt++ {
		_, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tmpl}.Sanitize())
		var pgErr *pgconn.PgError
		// 55006 object_in_use: another session is cloning the template right now.
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || attempt == 50 {
			return err
		}
		time.Sleep(time.Duration(20+attempt*10) * time.Millisecond)
	}
}

func migrationsHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:12], err
}

func withAdmin(ctx context.Context, admin string, f func(*pgx.Conn) error) error {
	c, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.Background()) }()
	return f(c)
}

func withDatabase(serverURL, db string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		return serverURL
	}
	u.Path = "/" + db
	return u.String()
}

// EmptyPostgresURL returns the URL of a new, empty database (no schema),
// dropped when the test ends: for tests of migrating itself.
func EmptyPostgresURL(t testing.TB) string {
	t.Helper()
	admin := pgServer.get(t, []string{"TEST_DATABASE_URL", "DATABASE_URL"}, startPostgres)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	name := Name("rp_e_")
	if err := withAdmin(ctx, admin, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		return err
	}); err != nil {
		t.Fatalf("testenv: create empty database: %v", err)
	}
	t.Cleanup(func() { dropDatabase(t, admin, name) })
	return withDatabase(admin, name)
}

func dropDatabase(t testing.TB, admin, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := withAdmin(ctx, admin, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		return err
	})
	if err != nil {
		t.Logf("testenv: drop %s: %v", name, err)
	}
}
