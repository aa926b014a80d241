package migrations

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // registers pgx5://
	"github.com/golang-migrate/migrate/v4/source/iofs"
)

// Up applies every pending migration to the database at databaseURL
// (postgres:// or postgresql://). It is idempotent and safe to run from
// several processes at once: golang-migrate holds an advisory lock meanwhile.
func Up(databaseURL string) error {
	src, err := iofs.New(FS, ".")
	if err != nil {
		return fmt.Errorf("open embedded migrations: %w", err)
	}
	u, err := url.Parse(databaseURL)
	if err != nil {
		return fmt.Errorf("parse database url: %w", err)
	}
	u.Scheme = "pgx5"
	m, err := migrate.NewWithSourceInstance("iofs", src, u.String())
	if err != nil {
		return fmt.Errorf("connect for migrations: %w", err)
	}
	defer m.Close()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}
