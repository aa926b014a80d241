package grab_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/testenv/stack"
)

// BenchmarkServiceGrab measures the whole in-process grab path (validation,
// order number, script, answer) from 64 goroutines, as a busy grabber runs
// it: granted grabs of distinct users on one hot envelope of 100,000
// packets, a new one created whenever it sells out. batch=1 sends one script
// call per grab; larger batches coalesce grabs that arrive together.
func BenchmarkServiceGrab(b *testing.B) {
	for _, batch := range []int{1, 16, 64} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			s := stack.New(b)
			defer s.Redis.Coalesce(4, batch)()
			benchServiceGrab(b, s)
		})
	}
}

func benchServiceGrab(b *testing.B, s *stack.Stack) {
	ctx := context.Background()
	var (
		mu      sync.Mutex
		current atomic.Int64
		user    atomic.Int64
	)
	create := func(soldOut int64) bool {
		mu.Lock()
		defer mu.Unlock()
		if current.Load() != soldOut {
			return true // another goroutine created one already
		}
		e, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "bench", TotalCents: 10_000_000, Count: 100_000})
		if err != nil {
			b.Error(err)
			return false
		}
		current.Store(e.ID)
		return true
	}
	if !create(0) {
		return
	}
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := "bench-user-" + strconv.FormatInt(user.Add(1), 10)
			for {
				id := current.Load()
				_, err := s.Svc.Grab(ctx, id, u)
				if errors.Is(err, grab.ErrSoldOut) {
					if !create(id) {
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

// BenchmarkCreate measures creating one envelope of 100,000 packets: ids,
// split, the PostgreSQL insert (COPY) and the Redis load.
func BenchmarkCreate(b *testing.B) {
	s := stack.New(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "bench", TotalCents: 10_000_000, Count: 100_000}); err != nil {
			b.Fatal(err)
		}
	}
}
