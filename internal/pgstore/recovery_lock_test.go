package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"redpacket/internal/pgstore"
)

// A recovery learns that it lost its lock when the session holding it ended
// under it, and leaves no lock behind. (Advisory locks are the database's:
// the other tests' databases have their own.)
func TestRecoveryLockHeldUntilItsSessionEnds(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	err := s.WithRecoveryLock(ctx, 1001, func(held func(context.Context) error) error {
		if err := held(ctx); err != nil {
			return err
		}
		var pid int
		if err := pool.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = 1919971939
			AND objid = 1001 AND objsubid = 2 AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&pid); err != nil {
			t.Fatalf("the lock is not held: %v", err)
		}
		if _, err := pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		return held(ctx)
	})
	if !errors.Is(err, pgstore.ErrRecoveryLockLost) {
		t.Errorf("after the lock's session ended: %v, want ErrRecoveryLockLost", err)
	}
	// pg_terminate_backend only signals the backend: its locks go when it
	// has exited, a moment later on a busy machine.
	var n int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 1919971939
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d recovery locks left 10s after their session ended", n)
		}
	}
}
