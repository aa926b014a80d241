package flush

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"redpacket/internal/testenv"
)

// settle refreshes every set of leases until none changes, at most 10 rounds.
func settleLeases(t *testing.T, ls ...*Leases) [][]int {
	t.Helper()
	ctx := context.Background()
	var last [][]int
	for range 10 {
		var held [][]int
		for _, l := range ls {
			shards, err := l.Refresh(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, shards)
		}
		if slices.EqualFunc(held, last, slices.Equal) {
			return held
		}
		last = held
	}
	return last
}

func wantPartition(t *testing.T, held [][]int, shards, maxEach int) {
	t.Helper()
	seen := map[int]int{}
	for i, h := range held {
		if len(h) > maxEach {
			t.Errorf("flusher %d holds %d shards, more than its share %d: %v", i, len(h), maxEach, h)
		}
		for _, s := range h {
			seen[s]++
		}
	}
	for s := range shards {
		if seen[s] != 1 {
			t.Errorf("shard %d is held by %d flushers, want exactly 1 (%v)", s, seen[s], held)
		}
	}
}

func TestLeasesShareShardsAndTakeOverFromTheDead(t *testing.T) {
	t.Parallel()
	_, url := testenv.Postgres(t)
	const shards = 16
	log := zaptest.NewLogger(t)
	a, b, c := NewLeases(url, shards, log), NewLeases(url, shards, log), NewLeases(url, shards, log)
	defer a.Close()
	defer b.Close()

	held := settleLeases(t, a)
	wantPartition(t, held, shards, shards)

	// Two more join: the first gives shards up until each holds its share.
	held = settleLeases(t, a, b, c)
	wantPartition(t, held, shards, 6)

	// One dies (its connection closes): the others hold everything again
	// within a round or two.
	start := time.Now()
	c.Close()
	held = settleLeases(t, a, b)
	wantPartition(t, held, shards, 8)
	t.Logf("takeover settled in %v", time.Since(start))
}
