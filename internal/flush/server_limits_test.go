package flush

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"redpacket/internal/pgstore"
	"redpacket/internal/testenv"
	"redpacket/internal/testenv/stack"
)

// A DBA's statement_timeout shorter than a settlement takes does not keep
// the envelope from settling (it failed the same way at every round,
// unrefunded): the settlement lifts the limit for its transaction.
func TestSettlementOutlastsTheDatabasesStatementTimeout(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := t.Context()
	e, claims := expiring(t, s, 10, 4)
	if err := newFlusher(t, s, Config{}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{ // refunds that take longer than the limit
		`CREATE FUNCTION test_slow_refund() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(2); RETURN NULL; END $$`,
		`CREATE TRIGGER test_slow_refund AFTER UPDATE ON packet_pool FOR EACH STATEMENT EXECUTE FUNCTION test_slow_refund()`,
	} {
		if _, err := s.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	limited := testenv.LimitedPool(t, s.Pool, s.DBURL, "statement_timeout", "1s")
	f := New(s.Redis, pgstore.New(limited), Config{}, zaptest.NewLogger(t))
	f.now = s.Clock.Now
	s.Clock.Advance(61 * time.Second)
	for range 2 { // closed, then settled
		if err := f.Upkeep(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	wantSettled(t, s, e.ID, claims)
}

// A settlement behind a lock a DBA holds (an index being built on
// packet_pool takes SHARE: its refunds wait) fails after settleLockTimeout
// and is retried the next round, rather than holding up the flusher's one
// loop, claims included, for as long as the lock is held.
func TestSettlementDoesNotWaitOutADBAsLock(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := t.Context()
	e, claims := expiring(t, s, 10, 4)
	f := newFlusher(t, s, Config{})
	f.now = s.Clock.Now
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	lock, err := s.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := lock.Exec(ctx, `LOCK TABLE packet_pool IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	s.Clock.Advance(61 * time.Second)
	start := time.Now()
	waitCtx, cancel := context.WithTimeout(ctx, 15*time.Second) // a settlement that waits on is cut off
	defer cancel()
	var upkeepErr error
	for range 2 { // closed, then its settlement waits on the lock
		if upkeepErr = f.Upkeep(waitCtx, false); upkeepErr != nil {
			break
		}
	}
	if waited := time.Since(start); upkeepErr == nil || waited > 10*time.Second {
		t.Fatalf("settlement behind a lock: %v after %s, want a failure within the lock timeout", upkeepErr, waited)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Upkeep(ctx, false); err != nil {
		t.Fatal(err)
	}
	wantSettled(t, s, e.ID, claims)
}
