package flush

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"redpacket/internal/testenv/stack"
)

// The flusher drains every shard of a Redis Cluster: Pending sees each
// shard's queue (one pipeline over every slot), batches are taken, written
// and acknowledged on the master of each shard, and PostgreSQL ends up with
// exactly the answers given.
func TestClusterFlusherDrainsEveryShard(t *testing.T) {
	t.Parallel()
	s := stack.NewCluster(t)
	ctx := context.Background()
	es, claims := s.GrabbedOnEveryShard(t, 5)

	k := s.Redis.Keys()
	want := make([]int64, k.Shards())
	masters := map[string]bool{}
	for i, e := range es {
		want[k.Shard(e.ID)] += int64(len(claims[i]))
		node, err := s.RDB.(*redis.ClusterClient).MasterForKey(ctx, k.Consumed(k.Shard(e.ID)))
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	pending, err := s.Redis.Pending(ctx)
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	for shard := range want {
		if pending[shard] != want[shard] {
			t.Fatalf("Pending = %v; want %v", pending, want)
		}
	}
	t.Logf("%d envelopes, queues on %d masters", len(es), len(masters))

	// A small batch: several batches per shard, and one crash between the
	// commit and the acknowledgement, re-applied by the next flusher.
	crashed := newFlusher(t, s, Config{BatchSize: 2, Pipeline: 2})
	crashed.afterCommit = func(int) error { return errCrash }
	shard := k.Shard(es[0].ID)
	if _, err := crashed.FlushShard(ctx, shard); !errors.Is(err, errCrash) {
		t.Fatalf("FlushShard = %v, want the crash", err)
	}
	// Two transactions of 2 a batch.
	if n, err := s.RDB.LLen(ctx, k.Inflight(shard)).Result(); err != nil || n != 4 {
		t.Fatalf("in flight after the crash: %d, %v; want the batch of 4", n, err)
	}
	if err := newFlusher(t, s, Config{BatchSize: 2}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		s.AssertDurable(t, e.ID, claims[i])
	}
}

// The daemon's loop on a Redis Cluster (see runFlushesEveryShard).
func TestClusterRunFlushesEveryShard(t *testing.T) {
	t.Parallel()
	runFlushesEveryShard(t, stack.NewCluster(t))
}

// The same on a single Redis.
func TestRunFlushesEveryShard(t *testing.T) {
	t.Parallel()
	runFlushesEveryShard(t, stack.New(t))
}

// runFlushesEveryShard runs the daemon's loop, with everything it does
// between passes, over grabs on every shard: they all reach PostgreSQL as
// answered, nothing is logged as an error, and Run stops on cancel.
func runFlushesEveryShard(t *testing.T, s *stack.Stack) {
	es, claims := s.GrabbedOnEveryShard(t, 3)
	total := 0
	for _, c := range claims {
		total += len(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Errors are logged and retried by Run; on healthy servers there must
	// be none.
	core, logs := observer.New(zap.WarnLevel)
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t).Core()))
	f := New(s.Redis, s.PG, Config{BatchSize: 4, IdleWait: 10 * time.Millisecond}, log)
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	waitClaimed(t, s, total, 15*time.Second)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	for i, e := range es {
		s.AssertDurable(t, e.ID, claims[i])
	}
	for _, entry := range logs.FilterLevelExact(zap.ErrorLevel).All() {
		t.Errorf("flusher logged an error: %s %v", entry.Message, entry.ContextMap())
	}
}

// waitClaimed waits until PostgreSQL holds n claimed packets, failing the
// test after d.
func waitClaimed(t *testing.T, s *stack.Stack, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := s.ClaimedInPG(t)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d claims flushed after %s", got, n, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
