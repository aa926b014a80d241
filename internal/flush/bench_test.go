package flush

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/envelope"
	"redpacket/internal/testenv/stack"
)

// BenchmarkDrain measures how fast the flusher makes queued claims durable:
// 100,000 claims of one hot envelope (so one shard, as in a real red-packet
// rush) are queued first, then drained with a batch size.
func BenchmarkDrain(b *testing.B) {
	for _, size := range []int{1000, 2000, 5000} {
		b.Run("batch="+strconv.Itoa(size), func(b *testing.B) {
			s := stack.New(b)
			defer s.Redis.Coalesce(4, 64)()
			f := New(s.Redis, s.PG, Config{BatchSize: size}, zap.NewNop())
			ctx := context.Background()
			var claims int
			var took time.Duration
			for range b.N {
				claims += queueClaims(b, s, 100_000)
				start := time.Now()
				if err := f.Drain(ctx); err != nil {
					b.Fatal(err)
				}
				took += time.Since(start)
			}
			b.ReportMetric(float64(claims)/took.Seconds(), "claims/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// queueClaims creates an envelope of n packets and grabs all of them.
func queueClaims(b *testing.B, s *stack.Stack, n int) int {
	ctx := context.Background()
	e, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "bench", TotalCents: int64(n) * 10, Count: int64(n)})
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if _, err := s.Svc.Grab(ctx, e.ID, "u"+strconv.FormatInt(i, 10)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return n
}
