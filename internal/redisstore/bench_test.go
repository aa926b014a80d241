package redisstore_test

import (
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"redpacket/internal/redisstore"
)

// BenchmarkGrab measures granted grabs of distinct users on one envelope,
// loading a fresh envelope whenever the current one sells out.
func BenchmarkGrab(b *testing.B) {
	benchGrab(b, func(*redisstore.Store) func() { return func() {} })
}

// benchGrab runs the grab benchmark from 64 goroutines (the way a busy
// grabber calls it) on a store set up by setup.
func benchGrab(b *testing.B, setup func(*redisstore.Store) (stop func())) {
	s, _ := newStore(b)
	defer setup(s)()
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	ctx := b.Context()
	const perEnvelope = 100_000
	now := time.Now()
	var (
		mu      sync.Mutex
		current atomic.Int64
		user    atomic.Int64
	)
	reload := func(soldOut int64) bool {
		mu.Lock()
		defer mu.Unlock()
		if current.Load() != soldOut {
			return true // another goroutine reloaded already
		}
		next := soldOut + 1
		ps, total := makePackets(next*1_000_000, perEnvelope)
		if _, err := s.LoadEnvelope(ctx, next, now.Add(time.Hour), total, ps); err != nil {
			b.Error(err)
			return false
		}
		current.Store(next)
		return true
	}
	if !reload(0) {
		return
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := "bench-user-" + strconv.FormatInt(user.Add(1), 10)
			for {
				id := current.Load()
				_, err := s.Grab(ctx, id, u, now)
				if errors.Is(err, redisstore.ErrSoldOut) {
					if !reload(id) {
						return
					}
					continue
				}
				if err != nil {
					b.Error(err)
					return
				}
				break
			}
		}
	})
}

// BenchmarkGrabCoalesced is BenchmarkGrab with grabs sharing round trips.
func BenchmarkGrabCoalesced(b *testing.B) {
	for _, workers := range []int{1, 2, 4, 8} {
		b.Run("workers="+strconv.Itoa(workers), func(b *testing.B) {
			benchGrab(b, func(s *redisstore.Store) func() { return s.Coalesce(workers, 64) })
		})
	}
}
