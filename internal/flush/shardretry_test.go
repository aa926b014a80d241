package flush

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"redpacket/internal/grab"
	"redpacket/internal/pgstore"
	"redpacket/internal/testenv/stack"
)

// A shard whose batches keep failing (on a Redis Cluster, its slot migrating
// to another master answers TRYAGAIN) is
// retried on a backoff of its own: the other shards' claims are written at
// their usual pace meanwhile, not after the failing shard's backoff, which
// grows to MaxBackoff.
func TestFailingShardDoesNotHoldUpTheOthers(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	k := s.Redis.Keys()
	broken, _ := s.Grabbed(t, 5, 3)
	f := newFlusher(t, s, Config{MaxBackoff: 10 * time.Second})
	var failures atomic.Int32
	f.afterTake = func(shard int) error {
		if shard != k.Shard(broken.ID) {
			return nil
		}
		failures.Add(1)
		return errors.New("shard unavailable (test)")
	}
	runInBackground(t, f)

	// After its eighth failure (50 ms, doubling) the broken shard waits
	// 6.4 s: a backoff it held the others to would keep them as long.
	waitUntil(t, "the broken shard's eighth failure", func() bool { return failures.Load() >= 8 })
	writtenWithin(t, s, k.Shard(broken.ID), 4*time.Second, "while a shard fails")
}

// runInBackground runs f until the test ends.
func runInBackground(t *testing.T, f *Flusher) {
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// waitUntil polls cond until it holds, failing the test after 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within 30 s", what)
		}
	}
}

// writtenWithin grabs three packets of an envelope on a shard other than
// avoid and checks that PostgreSQL holds them within the bound.
func writtenWithin(t *testing.T, s *stack.Stack, avoid int, within time.Duration, while string) {
	t.Helper()
	k := s.Redis.Keys()
	var other grab.Envelope
	for other.ID == 0 || k.Shard(other.ID) == avoid {
		other, _ = s.Grabbed(t, 5, 3)
	}
	grabbed := time.Now()
	for {
		var n int
		if err := s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM packets
			WHERE envelope_id = $1 AND claimed_by IS NOT NULL`, other.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 3 {
			return
		}
		if waited := time.Since(grabbed); waited > within {
			t.Fatalf("claims of shard %d not written %s after they were granted, %s: %d of 3",
				k.Shard(other.ID), waited.Round(time.Millisecond), while, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// While PostgreSQL is down, the flusher backs off: every part that fails
// (the shard with claims, the upkeep) retries on a backoff that grows from
// one failure to the next, never starting again at its shortest after a
// turn that had nothing due (a log line and an error counted every second).
func TestPostgresDownBacksOff(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	s.Grabbed(t, 5, 3) // a shard with claims to write
	down, err := pgxpool.New(t.Context(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	core, logs := observer.New(zap.ErrorLevel)
	f := New(s.Redis, pgstore.New(down), Config{MaxBackoff: 10 * time.Second}, zap.New(core))
	ctx, cancel := context.WithTimeout(t.Context(), 3500*time.Millisecond)
	defer cancel()
	if err := f.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var shortest, lines int
	for _, e := range logs.FilterMessage("flush failed; will retry").All() {
		lines++
		if d, ok := e.ContextMap()["backoff"].(time.Duration); ok && d == backoffStart {
			shortest++
		}
	}
	if lines == 0 || shortest > 1 {
		t.Errorf("%d lines said the shortest backoff (%s) in %d failures; want the first alone", shortest, backoffStart, lines)
	}
}

// An upkeep that keeps failing for one shard (its epoch unreadable, as
// when its Redis master is unreachable) retries on its own backoff: the
// claims of every shard are written at their usual pace meanwhile, not
// after the upkeep's backoff, which grows to MaxBackoff.
func TestFailingUpkeepDoesNotHoldUpTheClaims(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	k := s.Redis.Keys()
	first, _ := s.Grabbed(t, 5, 1)
	broken := (k.Shard(first.ID) + 1) % k.Shards()
	if err := s.RDB.LPush(t.Context(), k.Epoch(broken), "not an epoch").Err(); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.ErrorLevel)
	f := New(s.Redis, s.PG, Config{MaxBackoff: 10 * time.Second, SettleEvery: 100 * time.Millisecond}, zap.New(core))
	runInBackground(t, f)

	// After its seventh failure (50 ms, doubling) the upkeep waits 3.2 s,
	// and a loop it held up would sleep 6.4 s.
	failures := func() int { return logs.FilterMessage("flush failed; will retry").Len() }
	waitUntil(t, "the upkeep's seventh failure", func() bool { return failures() >= 7 })
	writtenWithin(t, s, broken, 3*time.Second, "while upkeep fails")
}
