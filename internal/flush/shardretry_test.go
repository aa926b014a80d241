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
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	// After its eighth failure (50 ms, doubling) the broken shard waits
	// 6.4 s: a backoff it held the others to would keep them as long.
	for deadline := time.Now().Add(30 * time.Second); failures.Load() < 8; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the broken shard failed %d times in 30 s", failures.Load())
		}
	}
	var other grab.Envelope
	for other.ID == 0 || k.Shard(other.ID) == k.Shard(broken.ID) {
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
			break
		}
		if waited := time.Since(grabbed); waited > 4*time.Second {
			t.Fatalf("claims of shard %d not written %s after they were granted, while shard %d fails: %d of 3",
				k.Shard(other.ID), waited.Round(time.Millisecond), k.Shard(broken.ID), n)
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
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	// After its seventh failure (50 ms, doubling) the upkeep waits 3.2 s,
	// and a loop it held up would sleep 6.4 s.
	for deadline := time.Now().Add(30 * time.Second); logs.FilterMessage("flush failed; will retry").Len() < 7; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the upkeep failed %d times in 30 s", logs.FilterMessage("flush failed; will retry").Len())
		}
	}
	var other grab.Envelope
	for other.ID == 0 || k.Shard(other.ID) == broken {
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
			break
		}
		if waited := time.Since(grabbed); waited > 3*time.Second {
			t.Fatalf("claims not written %s after they were granted, while upkeep fails: %d of 3",
				waited.Round(time.Millisecond), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
