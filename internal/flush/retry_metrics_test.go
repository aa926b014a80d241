package flush

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"redpacket/internal/telemetry"
	"redpacket/internal/testenv/stack"
)

// lagCount is how many claims redpacket_flush_lag_seconds has observed.
func lagCount(t *testing.T) uint64 {
	t.Helper()
	var m dto.Metric
	if err := telemetry.FlushLagSeconds.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// corruptMeta makes an envelope's meta unreadable, so that the check of any
// batch holding its claims fails after the commit; the function returned
// repairs it.
func corruptMeta(t *testing.T, s *stack.Stack, id int64) (repair func()) {
	t.Helper()
	ctx := context.Background()
	key := s.Redis.Keys().Meta(id)
	cents, err := s.RDB.HGet(ctx, key, "grabbed_cents").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RDB.HSet(ctx, key, "grabbed_cents", "not-a-number").Err(); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := s.RDB.HSet(ctx, key, "grabbed_cents", cents).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// A batch whose check fails after its commit is taken and committed again:
// redpacket_flush_lag_seconds still observes each claim once, as its help
// promises, and the error an operator reads in "flush failed; will retry"
// names the shard the stall alert names. Not parallel: the histogram is
// the process's.
func TestFailedCheckObservesLagOnceAndNamesShard(t *testing.T) {
	s := stack.New(t)
	ctx := context.Background()
	e, claims := s.Grabbed(t, 20, 12)
	shard := s.Redis.Keys().Shard(e.ID)
	f := newFlusher(t, s, Config{})
	before := lagCount(t)

	repair := corruptMeta(t, s, e.ID)
	_, err := f.FlushShard(ctx, shard)
	if err == nil {
		t.Fatal("the batch was acknowledged though its envelope's meta is unreadable")
	}
	if want := fmt.Sprintf("shard %d: ", shard); !strings.HasPrefix(err.Error(), want) {
		t.Errorf("check failure %q does not start with %q", err, want)
	}
	repair()
	if n, err := f.FlushShard(ctx, shard); err != nil || n != len(claims) {
		t.Fatalf("retry flushed %d claims, err %v; want %d", n, err, len(claims))
	}

	s.AssertDurable(t, e.ID, claims)
	if got, written := lagCount(t)-before, s.ClaimedInPG(t); got != uint64(written) {
		t.Errorf("redpacket_flush_lag_seconds observed %d claims, %d were written", got, written)
	}
}

// After a restart, redpacket_flush_batches_total has a series at 0 for each
// shard before its first batch, so that increase() counts that batch. Not
// parallel: the counter is the process's.
func TestRunStartsEveryShardsBatchCounterAtZero(t *testing.T) {
	s := stack.New(t)
	telemetry.FlushBatches.Reset() // as in a process just started
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Run starts, then stops before any batch
	if err := newFlusher(t, s, Config{}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	want.WriteString("# HELP redpacket_flush_batches_total Batches written to PostgreSQL and acknowledged in Redis, by shard.\n")
	want.WriteString("# TYPE redpacket_flush_batches_total counter\n")
	for shard := range stack.Shards {
		fmt.Fprintf(&want, "redpacket_flush_batches_total{shard=%q} 0\n", strconv.Itoa(shard))
	}
	if err := testutil.CollectAndCompare(telemetry.FlushBatches, strings.NewReader(want.String())); err != nil {
		t.Error(err)
	}
}
