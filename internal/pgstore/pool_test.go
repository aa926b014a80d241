package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"redpacket/internal/pgstore"
	"redpacket/internal/testenv"
)

// A database that turned read-only (a failover's standby before its
// promotion) and back: the pool never keeps a session it cannot write with,
// so writes succeed again as soon as the database takes them, not once the
// pool's read-only connections reach their lifetime an hour later.
func TestPoolWritesAgainOnceTheDatabaseIsWritable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := testenv.PostgresURL(t)
	admin, err := pgx.Connect(ctx, url) // made while writable: it stays so
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(context.WithoutCancel(ctx)) }()
	pool, err := pgstore.Connect(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	write := func(i int) error {
		_, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS rw_%d (x int)`, i))
		return err
	}
	adminExec := func(q string) {
		t.Helper()
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := write(0); err != nil {
		t.Fatal(err)
	}
	adminExec(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on', current_database()); END $$`)
	adminExec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	// The pool reconnects while the database is read-only, several
	// connections at once: none may write.
	errs := make(chan error, 4)
	for i := range 4 {
		go func() { errs <- write(10 + i) }()
	}
	for range 4 {
		if err := <-errs; err == nil {
			t.Fatal("a write succeeded on a read-only database")
		}
	}
	adminExec(`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET default_transaction_read_only', current_database()); END $$`)
	var pgErr *pgconn.PgError
	for i := range 3 { // a connection the server ended may be found dead once
		err := write(20 + i)
		if err == nil {
			return
		}
		if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.ReadOnlySQLTransaction {
			t.Fatalf("write %d once the database is writable again: %v", i, err)
		}
	}
	t.Fatal("no write succeeded once the database is writable again")
}

// With a lock timeout, a statement waiting on a lock (a DBA's ALTER TABLE
// holding the table) fails within it, as lock_not_available, rather than
// waiting for as long as the lock is held.
func TestPoolLockTimeout(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := testenv.PostgresURL(t)
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Close(context.WithoutCancel(ctx)) }()
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE envelopes IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	pool, err := pgstore.Connect(ctx, url, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = pool.Exec(waitCtx, `SELECT count(*) FROM envelopes`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.LockNotAvailable {
		t.Errorf("a read behind an exclusive lock: %v, want lock_not_available", err)
	}
}

// A database whose transactions default to repeatable read (or
// serializable): the pool's sessions are READ COMMITTED all the same, as
// the service's statements are written for (the pipelined claim chunks
// after the first all failed, 40001, and were written one by one).
func TestPoolTransactionsAreReadCommitted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := testenv.PostgresURL(t)
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(context.WithoutCancel(ctx)) }()
	if _, err := admin.Exec(ctx, `DO $$ BEGIN EXECUTE format(
		'ALTER DATABASE %I SET default_transaction_isolation = %L', current_database(), 'repeatable read'); END $$`); err != nil {
		t.Fatal(err)
	}
	pool, err := pgstore.Connect(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var level string
	if err := pool.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&level); err != nil || level != "read committed" {
		t.Errorf("a pool's transaction isolation %q (%v), want read committed", level, err)
	}
}
