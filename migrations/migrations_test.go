package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"

	"redpacket/internal/testenv"
	"redpacket/migrations"
)

var fileName = regexp.MustCompile(`^(\d{6})_([a-z0-9_]+)\.(up|down)\.sql$`)

// sqlFiles lists the migration files of fsys by version: name -> direction.
func sqlFiles(t *testing.T, fsys fs.FS) map[int]map[string]string {
	t.Helper()
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]map[string]string{}
	for _, n := range names {
		m := fileName.FindStringSubmatch(n)
		if m == nil {
			t.Errorf("%s: not NNNNNN_name.up.sql or NNNNNN_name.down.sql", n)
			continue
		}
		v, _ := strconv.Atoi(m[1])
		if out[v] == nil {
			out[v] = map[string]string{}
		}
		if prev, dup := out[v][m[3]]; dup {
			t.Errorf("version %d has two %s files: %s and %s", v, m[3], prev, n)
		}
		out[v][m[3]] = n
	}
	return out
}

func TestFiles(t *testing.T) {
	t.Parallel()
	embedded := sqlFiles(t, migrations.FS)
	if len(embedded) == 0 {
		t.Fatal("no migrations embedded")
	}
	// The embedded set is the directory's set.
	onDisk := sqlFiles(t, os.DirFS("."))
	if fmt.Sprint(onDisk) != fmt.Sprint(embedded) {
		t.Errorf("embedded %v, on disk %v", embedded, onDisk)
	}
	versions := make([]int, 0, len(embedded))
	for v, pair := range embedded {
		versions = append(versions, v)
		if pair["up"] == "" || pair["down"] == "" {
			t.Errorf("version %d is not an up/down pair: %v", v, pair)
			continue
		}
		if strings.TrimSuffix(pair["up"], ".up.sql") != strings.TrimSuffix(pair["down"], ".down.sql") {
			t.Errorf("version %d: %s and %s differ in name", v, pair["up"], pair["down"])
		}
		for _, f := range pair {
			b, err := fs.ReadFile(migrations.FS, f)
			if err != nil || len(strings.TrimSpace(string(b))) == 0 {
				t.Errorf("%s: empty or unreadable (%v)", f, err)
			}
		}
	}
	slices.Sort(versions)
	if got := versions[len(versions)-1]; got != migrations.Version {
		t.Errorf("highest migration is %06d, migrations.Version is %d", got, migrations.Version)
	}
	for i, v := range versions {
		if v != i+1 {
			t.Errorf("versions %v are not 1, 2, 3, ... without gaps", versions)
			break
		}
	}
}

// snapshot describes the public schema: tables and views with their columns,
// indexes, constraints, and the seeded settings.
func snapshot(t *testing.T, dbURL string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var b strings.Builder
	for _, q := range []string{
		`SELECT table_name || ' ' || table_type FROM information_schema.tables
			WHERE table_schema = 'public' AND table_name <> 'schema_migrations' ORDER BY 1`,
		`SELECT table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
			FROM information_schema.columns WHERE table_schema = 'public' AND table_name <> 'schema_migrations' ORDER BY 1`,
		`SELECT indexname || ' ' || indexdef FROM pg_indexes
			WHERE schemaname = 'public' AND tablename <> 'schema_migrations' ORDER BY 1`,
		`SELECT conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
			WHERE connamespace = 'public'::regnamespace AND conrelid::regclass::text <> 'schema_migrations' ORDER BY 1`,
		`SELECT viewname || ' ' || definition FROM pg_views WHERE schemaname = 'public' ORDER BY 1`,
		`SELECT key_name || ' ' || current_value || ' ' || max_value || ' ' || step FROM sequence_numbers ORDER BY 1`,
		`SELECT name || ' ' || value FROM service_settings ORDER BY 1`,
	} {
		rows, err := c.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		b.WriteString(strings.Join(lines, "\n") + "\n--\n")
	}
	return b.String()
}

func userTables(t *testing.T, dbURL string) []string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = 'public' AND table_name <> 'schema_migrations' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func version(t *testing.T, dbURL string) (int64, bool) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v int64
	var dirty bool
	if err := c.QueryRow(ctx, `SELECT version, dirty FROM schema_migrations`).Scan(&v, &dirty); err != nil {
		return -1, false
	}
	return v, dirty
}

// downTo is a test database migrated to the latest version and taken down
// to version v: its migrate handle (to go up again) and its URL.
func downTo(t *testing.T, v int) (*migrate.Migrate, string) {
	t.Helper()
	dbURL := testenv.PostgresURL(t)
	m := newMigrate(t, dbURL)
	if v < migrations.Version {
		if err := m.Steps(v - migrations.Version); err != nil {
			t.Fatalf("down to %d: %v", v, err)
		}
	}
	return m, dbURL
}

func newMigrate(t *testing.T, dbURL string) *migrate.Migrate {
	t.Helper()
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme = "pgx5"
	m, err := migrate.NewWithSourceInstance("iofs", src, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestUpIdempotent(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	before := snapshot(t, dbURL)
	for i := range 2 {
		if err := migrations.Up(dbURL); err != nil {
			t.Fatalf("Up #%d on a migrated database: %v", i+1, err)
		}
	}
	if v, dirty := version(t, dbURL); v != migrations.Version || dirty {
		t.Errorf("schema_migrations = %d dirty=%v, want %d clean", v, dirty, migrations.Version)
	}
	if after := snapshot(t, dbURL); after != before {
		t.Errorf("schema changed by a repeated Up:\n%s\nvs\n%s", before, after)
	}
}

func TestDownUpRoundTrip(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	want := snapshot(t, dbURL)
	for _, table := range []string{"claim_conflicts", "claims", "envelopes", "packet_pool", "sequence_numbers", "service_settings"} {
		if !strings.Contains(want, "\n"+table+" BASE TABLE\n") && !strings.HasPrefix(want, table+" BASE TABLE\n") {
			t.Errorf("migrated schema lacks table %s", table)
		}
	}
	for _, view := range []string{"envelope_totals", "packets", "user_grabs"} {
		if !strings.Contains(want, view+" VIEW") {
			t.Errorf("migrated schema lacks view %s", view)
		}
	}

	m := newMigrate(t, dbURL)
	if err := m.Down(); err != nil {
		t.Fatalf("down: %v", err)
	}
	if left := userTables(t, dbURL); len(left) != 0 {
		t.Errorf("down left %v", left)
	}
	if _, _, err := m.Version(); !errors.Is(err, migrate.ErrNilVersion) {
		t.Errorf("version after down: %v, want none", err)
	}

	// The daemons' own Up builds the schema again from nothing, once.
	for i := range 2 {
		if err := migrations.Up(dbURL); err != nil {
			t.Fatalf("Up #%d after down: %v", i+1, err)
		}
	}
	if got := snapshot(t, dbURL); got != want {
		t.Errorf("schema after down+up differs:\n%s\nwant\n%s", got, want)
	}
	if v, dirty := version(t, dbURL); v != migrations.Version || dirty {
		t.Errorf("schema_migrations = %d dirty=%v, want %d clean", v, dirty, migrations.Version)
	}

	// And step by step with golang-migrate, every version down and up.
	for v := migrations.Version; v >= 1; v-- {
		if err := m.Steps(-1); err != nil {
			t.Fatalf("step down from %d: %v", v, err)
		}
	}
	if err := m.Up(); err != nil {
		t.Fatalf("up: %v", err)
	}
	if got := snapshot(t, dbURL); got != want {
		t.Errorf("schema after steps down and up differs")
	}
	if err := m.Up(); !errors.Is(err, migrate.ErrNoChange) {
		t.Errorf("second up = %v, want ErrNoChange", err)
	}
}

func TestUpBadURL(t *testing.T) {
	t.Parallel()
	if err := migrations.Up("postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"); err == nil {
		t.Errorf("Up against a closed port succeeded")
	}
	if err := migrations.Up("::not a url"); err == nil {
		t.Errorf("Up with a malformed URL succeeded")
	}
}
