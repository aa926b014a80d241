package pgstore_test

import (
	"sync"
	"testing"
)

// TestReserveOrderNos: concurrent reservations of one shard's day get
// disjoint ranges that together cover (0, n*step] exactly; other shards and
// days count on their own.
func TestReserveOrderNos(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	const step, workers, each = 7, 8, 10
	var (
		mu   sync.Mutex
		olds = map[int64]int64{}
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for range each {
				old, upto, err := s.ReserveOrderNos(ctx, "20300517", 3, step)
				if err != nil || upto != old+step {
					t.Errorf("ReserveOrderNos = %d, %d, %v", old, upto, err)
					return
				}
				mu.Lock()
				olds[old]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := range int64(workers * each) {
		if olds[i*step] != 1 {
			t.Fatalf("range starting at %d reserved %d times; all: %v", i*step, olds[i*step], olds)
		}
	}
	for _, c := range []struct {
		date  string
		shard int
	}{{"20300517", 4}, {"20300518", 3}} {
		if old, upto, err := s.ReserveOrderNos(ctx, c.date, c.shard, 100); old != 0 || upto != 100 || err != nil {
			t.Errorf("first reservation of shard %d on %s = %d, %d, %v; want 0, 100", c.shard, c.date, old, upto, err)
		}
	}
	for _, bad := range []string{"2030-05-1", "20301317", ""} {
		if _, _, err := s.ReserveOrderNos(ctx, bad, 1, 1); err == nil {
			t.Errorf("date %q accepted", bad)
		}
	}
	if _, _, err := s.ReserveOrderNos(ctx, "20300517", 1, 0); err == nil {
		t.Errorf("step 0 accepted")
	}
}
