package grab_test

import (
	"testing"

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
			cfg := s.Config
			cfg.Safety.Limiter = limits.New(s.RDB, s.Redis.Keys(), tc.c)
			s.Svc = grab.New(cfg)
			defer s.Redis.Coalesce(4, 16)()
			benchServiceGrab(b, s)
		})
	}
}
