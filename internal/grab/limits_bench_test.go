package grab_test

import (
	"errors"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/limits"
	"redpacket/internal/testenv/stack"
)

// BenchmarkServiceGrabLimits measures what the user limits cost the grab
// path, against the same path without them in the same run (limits=none):
// BenchmarkServiceGrab's load (distinct users on a hot envelope, 64
// goroutines, grabs coalesced 16 to a call) with each limit set high enough
// never to refuse, so every grab pays the check and nothing else changes.
func BenchmarkServiceGrabLimits(b *testing.B) {
	withEachLimit(b, benchServiceGrab)
}

// BenchmarkServiceGrabSoldOutLimits measures the grabs that come after an
// envelope's last packet, the most of a hot envelope's: distinct users, 64
// goroutines, grabs coalesced 16 to a call, each answered sold out, with
// and without the user limits in the same run.
func BenchmarkServiceGrabSoldOutLimits(b *testing.B) {
	withEachLimit(b, benchSoldOutGrabs)
}

// withEachLimit runs bench once per setting of the limits, none first, each
// high enough never to refuse, on a stack of its own whose service has them
// and coalesces grabs 16 to a call.
func withEachLimit(b *testing.B, bench func(*testing.B, *stack.Stack)) {
	for _, tc := range []struct {
		name string
		c    limits.Config
	}{
		{"none", limits.Config{}},
		{"rate", limits.Config{UserGrabRate: 1_000}},
		{"daily", limits.Config{UserDailyGrabs: 1_000}},
		{"rate+daily", limits.Config{UserGrabRate: 1_000, UserDailyGrabs: 1_000}},
	} {
		b.Run("limits="+tc.name, func(b *testing.B) {
			s := stack.New(b)
			s.Svc = limited(s, tc.c)
			defer s.Redis.Coalesce(4, 16)()
			bench(b, s)
		})
	}
}

// benchSoldOutGrabs grabs a sold-out envelope as distinct users.
func benchSoldOutGrabs(b *testing.B, s *stack.Stack) {
	ctx := b.Context()
	e, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "bench", TotalCents: 100, Count: 1})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Svc.Grab(ctx, e.ID, "winner"); err != nil {
		b.Fatal(err)
	}
	var user atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := "late-" + strconv.FormatInt(user.Add(1), 10)
			if _, err := s.Svc.Grab(ctx, e.ID, u); !errors.Is(err, grab.ErrSoldOut) {
				b.Errorf("%s: %v, want sold out", u, err)
				return
			}
		}
	})
}
