package migrations

import (
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

	"redpacket/internal/db/dburl"
)

// Migration is one numbered migration.
type Migration struct {
	Version int
	Name    string // from the file name: 000005_events.up.sql is "events"
}

func (m Migration) String() string { return fmt.Sprintf("%06d_%s", m.Version, m.Name) }

// Up applies every pending migration to the database at databaseURL
// (postgres:// or postgresql://). It is idempotent and safe to run from
// several processes at once: golang-migrate holds an advisory lock meanwhile.
func Up(databaseURL string) error {
	_, err := Apply(databaseURL)
	return err
}

// Apply is Up, and returns the migrations it applied, in order: none when
// the schema was already current (or another process applied them first).
func Apply(databaseURL string) ([]Migration, error) {
	src, err := iofs.New(FS, ".")
	if err != nil {
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	u, err := url.Parse(dburl.Session(databaseURL))
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	u.Scheme = "pgx5"
	m, err := migrate.NewWithSourceInstance("iofs", src, u.String())
	if err != nil {
		return nil, fmt.Errorf("connect for migrations: %w", err)
	}
	defer m.Close()
	before, err := version(m)
	if err != nil {
		return nil, err
	}
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return nil, fmt.Errorf("apply migrations: %w", err)
	}
	after, err := version(m)
	if err != nil {
		return nil, err
	}
	return between(before, after)
}

// version is the schema's version, 0 before any migration. Read before Up,
// it may be passed by another process applying migrations at the same time;
// what this one reports applied is then what it saw change.
func version(m *migrate.Migrate) (int, error) {
	v, _, err := m.Version()
	switch {
	case errors.Is(err, migrate.ErrNilVersion):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read the schema version: %w", err)
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
