package ids

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

func BenchmarkShareNext(b *testing.B) {
	rdb, prefix := testenv.Redis(b)
	// A day holds 90,000 codes: the clock moves a day on every 80,000
	// calls, so long runs measure taking codes, not ErrExhausted.
	var calls atomic.Int64
	start := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	s := NewShareCodes(rdb, redisstore.NewKeys(prefix, 4), ShareConfig{Now: func() time.Time {
		return start.AddDate(0, 0, int(calls.Add(1)/80_000))
	}})
	ctx := context.Background()
	if _, err := s.Next(ctx); err != nil { // creates the pool
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkShortIDGet(b *testing.B) {
	rdb, prefix := testenv.Redis(b)
	pool, _ := testenv.Postgres(b)
	s := NewShortIDs(rdb, redisstore.NewKeys(prefix, 4), pool, ShortIDConfig{})
	ctx := context.Background()
	var user int
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			user++
			if _, err := s.Get(ctx, fmt.Sprint("new-", user)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("existing", func(b *testing.B) {
		users := make([]string, 1000)
		for i := range users {
			users[i] = fmt.Sprint("known-", i)
			if _, err := s.Get(ctx, users[i]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if _, err := s.Get(ctx, users[i%len(users)]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
