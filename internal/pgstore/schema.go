package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/db/dbsqlc"
	"redpacket/migrations"
)

// ErrSchemaTooOld means the database has not been migrated to the version this
// build needs (run `flusher migrate`).
var ErrSchemaTooOld = errors.New("database schema is older than this build needs")

// CheckSchema returns ErrSchemaTooOld unless the database is at least at
// migrations.Version and not left dirty by a failed migration.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	v, err := dbsqlc.New(pool).SchemaVersion(ctx)
	version, dirty := v.Version, v.Dirty
	switch {
	case errors.Is(err, pgx.ErrNoRows) || isUndefinedTable(err):
		return fmt.Errorf("%w: no migrations applied (need version %d)", ErrSchemaTooOld, migrations.Version)
	case err != nil:
		return fmt.Errorf("read schema version: %w", err)
	case (dirty || version < migrations.Version) && migrating(ctx, pool):
		return fmt.Errorf("%w: a migration is under way (database at version %d, need %d); start again when it is done",
			ErrSchemaTooOld, version, migrations.Version)
	case dirty:
		return fmt.Errorf("%w: version %d is dirty (a migration failed half-way)", ErrSchemaTooOld, version)
	case version < migrations.Version:
		return fmt.Errorf("%w: database at version %d, need %d", ErrSchemaTooOld, version, migrations.Version)
	}
	return nil
}

// migrating says whether a process holds the migration lock now: a dirty
// version is then a migration under way, not one that failed. Unknown (an
// error) reads as no.
func migrating(ctx context.Context, pool *pgxpool.Pool) bool {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false
	}
	defer conn.Release()
	q := dbsqlc.New(conn)
	free, err := q.TryLockMigrations(ctx, migrations.LockKey)
	if err != nil {
		return false
	}
	if free {
		if err := q.UnlockMigrations(ctx, migrations.LockKey); err != nil {
			_ = conn.Conn().Close(ctx) // a session still holding the lock must not go back to the pool
		}
	}
	return !free
}

// Shards reads the number of Redis shards every process must use.
func Shards(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	n, err := dbsqlc.New(pool).RedisShards(ctx)
	if err != nil {
		return 0, fmt.Errorf("read redis_shards setting: %w", err)
	}
	if n < 1 || n > 1<<14 {
		return 0, fmt.Errorf("redis_shards setting %d out of range 1..16384", n)
	}
	return int(n), nil
}
