package migrations

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"regexp"
	"sort"
	"strconv"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/db/dburl"
)

// Migration is one numbered migration.
type Migration struct {
	Version int
	Name    string // from the file name: 000005_events.up.sql is "events"
}

func (m Migration) String() string { return fmt.Sprintf("%06d_%s", m.Version, m.Name) }

// LockKey is the session advisory lock a process holds while it applies
// migrations (Apply), so that others wait for it, and the grabber can tell
// a migration under way from one that failed half-way (a dirty version).
const LockKey int64 = 0x72656470_6d696772 // "redpmigr"

// Up applies every pending migration to the database at databaseURL
// (postgres:// or postgresql://). It is idempotent and safe to run from
// several processes at once: each waits for the others under LockKey.
func Up(databaseURL string) error {
	_, _, err := Apply(context.Background(), databaseURL, nil)
	return err
}

// Apply is Up, and returns the migrations it applied, in order: none when
// the schema was already current (or another process applied them first);
// with an error, those it applied before it. It returns the schema's
// version too, after them: above Version when a newer build migrated the
// database (the daemons accept it; nothing is applied); with an error, the
// last version applied cleanly, a schema found dirty's own, or 0 when it
// could not read it.
// It waits for another process's migrations as long as ctx lasts (calling
// waiting, when not nil, as it begins to), and once ctx ends applies no
// further migration after the one under way.
func Apply(ctx context.Context, databaseURL string, waiting func()) ([]Migration, int, error) {
	cfg, err := dburl.SessionConfig(databaseURL)
	if err != nil {
		return nil, 0, fmt.Errorf("connect for the migration lock: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("connect for the migration lock: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx)) // ends the session, and so the lock
	q := dbsqlc.New(conn)
	locked, err := q.TryLockMigrations(ctx, LockKey)
	if err == nil && !locked {
		if waiting != nil {
			waiting()
		}
		err = q.LockMigrations(ctx, LockKey)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("wait for another process's migrations: %w", err)
	}
	m, err := open(databaseURL)
	if err != nil {
		return nil, 0, err
	}
	defer m.Close()
	// Read under the lock: what another process applied before is not
	// reported as this one's.
	before, err := version(m)
	if err != nil {
		return nil, before, fmt.Errorf("apply migrations: %w", err)
	}
	// One migration at a time, the context checked between them: a stop
	// ends the migrations after the one under way.
	after := before
	for after < Version {
		if err := ctx.Err(); err != nil {
			applied, _ := between(before, after)
			return applied, after, fmt.Errorf("stopped at version %d of %d: %w", after, Version, context.Cause(ctx))
		}
		next := after
		err := m.Steps(1)
		if err == nil {
			next, err = version(m)
		}
		if err != nil { // the step failed: those before it stay applied
			applied, _ := between(before, after)
			return applied, after, fmt.Errorf("apply migrations: %w", err)
		}
		after = next
	}
	applied, err := between(before, after)
	return applied, after, err
}

// open connects golang-migrate to the database, with the embedded files.
func open(databaseURL string) (*migrate.Migrate, error) {
	src, err := iofs.New(FS, ".")
	if err != nil {
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	u, err := url.Parse(dburl.Session(databaseURL))
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	u.Scheme = "pgx5"
	if dburl.WantsWritable(databaseURL) {
		// As the lock's session: the migrations run on the server that takes
		// writes, whichever of several hosts it is.
		q := u.Query()
		q.Set("target_session_attrs", "read-write")
		u.RawQuery = q.Encode()
	}
	m, err := migrate.NewWithSourceInstance("iofs", src, u.String())
	if err != nil {
		return nil, fmt.Errorf("connect for migrations: %w", err)
	}
	return m, nil
}

// version is the schema's version, 0 before any migration.
func version(m *migrate.Migrate) (int, error) {
	v, dirty, err := m.Version()
	switch {
	case errors.Is(err, migrate.ErrNilVersion):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read the schema version: %w", err)
	case dirty:
		// A migration failed half-way (the lock is ours, so none runs
		// now): nothing goes on until an operator mends it (docs/dba.md).
		return int(v), migrate.ErrDirty{Version: int(v)}
	}
	return int(v), nil
}

var upFile = regexp.MustCompile(`^(\d+)_(.+)\.up\.sql$`)

// between lists the embedded migrations above from, up to and with to.
func between(from, to int) ([]Migration, error) {
	names, err := fs.Glob(FS, "*.up.sql")
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, n := range names {
		m := upFile.FindStringSubmatch(n)
		if m == nil {
			continue
		}
		v, _ := strconv.Atoi(m[1])
		if v > from && v <= to {
			out = append(out, Migration{Version: v, Name: m[2]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
