package migrations_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/testenv"
	"redpacket/migrations"
)

// Apply says what it applied: every migration, by version and name, on an
// empty database; nothing the second time.
func TestApplyReportsWhatItApplied(t *testing.T) {
	t.Parallel()
	url := testenv.EmptyPostgresURL(t)
	applied, _, err := migrations.Apply(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != migrations.Version {
		t.Fatalf("applied %v on an empty database, want versions 1 to %d", applied, migrations.Version)
	}
	for i, m := range applied {
		if m.Version != i+1 || m.Name == "" {
			t.Errorf("applied[%d] = %+v, want version %d with its name", i, m, i+1)
		}
	}
	if applied[0].String() != "000001_core" {
		t.Errorf("first applied %q, want 000001_core", applied[0])
	}
	again, _, err := migrations.Apply(t.Context(), url, nil)
	if err != nil || len(again) != 0 {
		t.Fatalf("second Apply = %v, %v; want nothing applied", again, err)
	}
}

// Two processes migrating one database at once: one applies every
// migration, the other waits for it, then finds nothing to apply and says
// so (it does not fail, nor claim the other's work).
func TestApplyFromTwoProcessesAtOnce(t *testing.T) {
	t.Parallel()
	url := testenv.EmptyPostgresURL(t)
	var wg sync.WaitGroup
	applied := make([][]migrations.Migration, 2)
	errs := make([]error, 2)
	for i := range applied {
		wg.Go(func() { applied[i], _, errs[i] = migrations.Apply(t.Context(), url, nil) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("Apply errors: %v, %v", errs[0], errs[1])
	}
	if n0, n1 := len(applied[0]), len(applied[1]); min(n0, n1) != 0 || max(n0, n1) != migrations.Version {
		t.Errorf("the two applied %d and %d migrations; want %d and none", n0, n1, migrations.Version)
	}
}

// While another process holds the migration lock, Apply waits, says so,
// and gives up when its context ends (a stop signal), applying nothing.
func TestApplyWaitsForTheLockUntilStopped(t *testing.T) {
	t.Parallel()
	url := testenv.EmptyPostgresURL(t)
	holder, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	if _, err := holder.Exec(t.Context(), "SELECT pg_advisory_lock($1)", migrations.LockKey); err != nil {
		t.Fatal(err)
	}
	// Long enough to connect and try the lock on a loaded machine.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	waited := false
	start := time.Now()
	applied, _, err := migrations.Apply(ctx, url, func() { waited = true })
	if err == nil || len(applied) != 0 || !waited || time.Since(start) > 10*time.Second {
		t.Fatalf("Apply under another's lock = %v, %v after %v (waiting said: %v); want an error by its deadline, nothing applied",
			applied, err, time.Since(start), waited)
	}
	var tables int
	if err := holder.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE tablename = 'envelopes'").Scan(&tables); err != nil || tables != 0 {
		t.Errorf("envelopes tables after a stopped Apply: %d, %v; want none", tables, err)
	}
}

// A stop (the context ending) while migrations run ends them after the one
// under way: the schema is left clean at that version, and Apply returns
// the migrations it applied with the error.
func TestApplyStopsBetweenMigrations(t *testing.T) {
	t.Parallel()
	url := testenv.EmptyPostgresURL(t)
	watcher, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watcher.Close(context.Background()) })
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	go func() {
		defer stop()
		for ctx.Err() == nil {
			var v int
			if watcher.QueryRow(ctx, "SELECT version FROM schema_migrations").Scan(&v) == nil && v >= 3 {
				return // stop once the third migration is in
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	applied, _, err := migrations.Apply(ctx, url, nil)
	var version int
	var dirty bool
	if err := watcher.QueryRow(t.Context(), "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty); err != nil {
		t.Fatal(err)
	}
	if err == nil || dirty || version >= migrations.Version || len(applied) != version {
		t.Fatalf("Apply stopped = %d applied, %v; schema at %d (dirty %v); want an error, a clean schema below %d, and its migrations reported",
			len(applied), err, version, dirty, migrations.Version)
	}
}

// A schema left dirty by a failed migration is refused, also at this
// build's version: nothing is applied, and the error says dirty.
func TestApplyRefusesADirtySchema(t *testing.T) {
	t.Parallel()
	url, c := migrated(t)
	if _, err := c.Exec(t.Context(), "UPDATE schema_migrations SET dirty = true"); err != nil {
		t.Fatal(err)
	}
	applied, _, err := migrations.Apply(t.Context(), url, nil)
	if err == nil || len(applied) != 0 || !strings.Contains(err.Error(), "Dirty") {
		t.Fatalf("Apply on a dirty schema = %v, %v; want the dirty version refused", applied, err)
	}
}

// A database a newer build migrated: nothing is applied, no error, and
// Apply says the database's version, not this build's.
func TestApplyOnANewerSchemaSaysItsVersion(t *testing.T) {
	t.Parallel()
	url, c := migrated(t)
	if _, err := c.Exec(t.Context(), "UPDATE schema_migrations SET version = $1", migrations.Version+1); err != nil {
		t.Fatal(err)
	}
	applied, version, err := migrations.Apply(t.Context(), url, nil)
	if err != nil || len(applied) != 0 || version != migrations.Version+1 {
		t.Fatalf("Apply on a newer schema = %v, version %d, %v; want nothing applied at version %d",
			applied, version, err, migrations.Version+1)
	}
}

// migrated is a database with every migration applied, and a connection to
// it for the test to change its schema's record.
func migrated(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	url := testenv.EmptyPostgresURL(t)
	if _, _, err := migrations.Apply(t.Context(), url, nil); err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return url, c
}
