package redisstore_test

import (
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
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

// BenchmarkLoadEnvelope loads envelopes of many packets while another
// connection PINGs the same Redis in a loop, and reports, beside the time a
// load takes, the longest a PING waited during it (stall-ms): how long the
// load held Redis, and so every grab on it, at most.
func BenchmarkLoadEnvelope(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run("packets="+strconv.Itoa(n), func(b *testing.B) {
			s, rdb := newStore(b)
			ps, total := makePackets(1, n)
			var worst time.Duration
			for i := 0; b.Loop(); i++ {
				stop, stalled := pingWhile(b, rdb)
				loaded, err := s.LoadEnvelope(b.Context(), int64(i+1), time.Now().Add(time.Hour), total, ps)
				stop()
				if err != nil || !loaded {
					b.Fatalf("LoadEnvelope = %v, %v", loaded, err)
				}
				worst = max(worst, <-stalled)
				b.StopTimer()
				rdb.Unlink(b.Context(), s.Keys().Pool(int64(i+1)), s.Keys().Meta(int64(i+1)))
				b.StartTimer()
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "stall-ms")
		})
	}
}

// BenchmarkReloadEnvelope is BenchmarkLoadEnvelope for an operator's
// reload of a suspended envelope, half its packets claimed: the longest a
// PING waited (stall-ms) is how long the reload held Redis at most.
func BenchmarkReloadEnvelope(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run("packets="+strconv.Itoa(n), func(b *testing.B) {
			rdb, prefix := testenv.Redis(b)
			// A read timeout longer than any reload: the figure is the
			// stall, not the client giving up.
			opts := *rdb.(*redis.Client).Options()
			opts.ReadTimeout = time.Minute
			c := redis.NewClient(&opts)
			b.Cleanup(func() { _ = c.Close() })
			s := redisstore.New(c, prefix, testShards)
			ps, total := makePackets(1, n)
			held, pool := heldClaims(ps, n/2), ps[n/2:]
			const id = 1
			var worst time.Duration
			for b.Loop() {
				b.StopTimer()
				if err := rdb.HSet(b.Context(), s.Keys().Meta(id), "status", "suspended").Err(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				stop, stalled := pingWhile(b, rdb)
				err := s.Reload(b.Context(), id, time.Now().Add(time.Hour), total, n, held, pool, redisstore.Gates{})
				stop()
				if err != nil {
					b.Fatalf("Reload = %v", err)
				}
				worst = max(worst, <-stalled)
			}
			b.ReportMetric(float64(worst.Microseconds())/1000, "stall-ms")
		})
	}
}

// pingWhile PINGs Redis on a connection of its own until stop is called,
// then sends the longest a PING waited.
func pingWhile(b *testing.B, rdb redis.UniversalClient) (stop func(), longest <-chan time.Duration) {
	opts := rdb.(*redis.Client).Options()
	c := redis.NewClient(&redis.Options{Addr: opts.Addr, DB: opts.DB, ReadTimeout: time.Minute})
	if err := c.Ping(b.Context()).Err(); err != nil {
		b.Fatal(err)
	}
	var done atomic.Bool
	out := make(chan time.Duration, 1)
	go func() {
		defer c.Close()
		var most time.Duration
		for !done.Load() {
			t0 := time.Now()
			if err := c.Ping(b.Context()).Err(); err != nil {
				break
			}
			most = max(most, time.Since(t0))
		}
		out <- most
	}()
	return func() { done.Store(true) }, out
}
