package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"redpacket/internal/pgstore"
	"redpacket/internal/testenv"
	"redpacket/migrations"
)

func TestCheckSchema(t *testing.T) {
	t.Parallel()
	t.Run("migrated", func(t *testing.T) {
		t.Parallel()
		pool, _ := testenv.Postgres(t)
		if err := pgstore.CheckSchema(t.Context(), pool); err != nil {
			t.Fatalf("CheckSchema on a migrated database: %v", err)
		}
		n, err := pgstore.Shards(t.Context(), pool)
		if err != nil || n != 16 {
			t.Errorf("Shards = %d, %v; want 16", n, err)
		}
	})
	t.Run("newer", func(t *testing.T) {
		t.Parallel()
		pool, _ := testenv.Postgres(t)
		if _, err := pool.Exec(t.Context(), `UPDATE schema_migrations SET version = $1`, migrations.Version+1); err != nil {
			t.Fatal(err)
		}
		if err := pgstore.CheckSchema(t.Context(), pool); err != nil {
			t.Errorf("CheckSchema on a newer schema: %v", err)
		}
	})
	tooOld := map[string]string{
		"lower version": `UPDATE schema_migrations SET version = ` + itoa(migrations.Version-1),
		"dirty":         `UPDATE schema_migrations SET dirty = true`,
		"dirty newer":   `UPDATE schema_migrations SET dirty = true, version = ` + itoa(migrations.Version+1),
		"no row":        `DELETE FROM schema_migrations`,
		"no table":      `DROP TABLE schema_migrations`,
	}
	for name, change := range tooOld {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool, _ := testenv.Postgres(t)
			if _, err := pool.Exec(t.Context(), change); err != nil {
				t.Fatal(err)
			}
			err := pgstore.CheckSchema(t.Context(), pool)
			if !errors.Is(err, pgstore.ErrSchemaTooOld) {
				t.Errorf("CheckSchema = %v, want ErrSchemaTooOld", err)
			}
		})
	}
}

// A dirty version while a process holds the migration lock is a migration
// under way, and the answer says so; the same version without the lock is
// one that failed half-way.
func TestCheckSchemaTellsAMigrationUnderWay(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	if _, err := pool.Exec(t.Context(), `UPDATE schema_migrations SET dirty = true`); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.CheckSchema(t.Context(), pool); !errors.Is(err, pgstore.ErrSchemaTooOld) ||
		!strings.Contains(err.Error(), "failed half-way") {
		t.Fatalf("CheckSchema, dirty with nobody migrating = %v; want a migration that failed", err)
	}
	holder, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(t.Context(), `SELECT pg_advisory_lock($1)`, migrations.LockKey); err != nil {
		t.Fatal(err)
	}
	defer holder.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, migrations.LockKey) //nolint:errcheck
	if err := pgstore.CheckSchema(t.Context(), pool); !errors.Is(err, pgstore.ErrSchemaTooOld) ||
		!strings.Contains(err.Error(), "a migration is under way") {
		t.Fatalf("CheckSchema, dirty while another process migrates = %v; want a migration under way", err)
	}
}

func TestShardsSetting(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	for _, c := range []struct {
		value int64
		ok    bool
	}{{1, true}, {16384, true}, {0, false}, {-3, false}, {16385, false}, {7, true}} {
		if _, err := pool.Exec(ctx, `UPDATE service_settings SET value = $1 WHERE name = 'redis_shards'`, c.value); err != nil {
			t.Fatal(err)
		}
		n, err := pgstore.Shards(ctx, pool)
		if c.ok && (err != nil || int64(n) != c.value) {
			t.Errorf("Shards = %d, %v; want %d", n, err, c.value)
		}
		if !c.ok && err == nil {
			t.Errorf("Shards = %d with setting %d, want an error", n, c.value)
		}
	}
	if _, err := pool.Exec(ctx, `DELETE FROM service_settings`); err != nil {
		t.Fatal(err)
	}
	if n, err := pgstore.Shards(ctx, pool); err == nil {
		t.Errorf("Shards = %d without the setting, want an error", n)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
