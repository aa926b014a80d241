package retention

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"redpacket/internal/testenv"
)

// The daemon's loop removes what is due at start, and returns once its
// context ends.
func TestLoopRunsAtStartAndStops(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	seed(t, pool, 1, 4, "settled", time.Now().Add(-48*time.Hour))
	seed(t, pool, 2, 4, "settled", time.Now())
	o := options(t, 24*time.Hour)
	o.Now = nil
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- (&Loop{Pool: pool, Options: o, Log: zaptest.NewLogger(t)}).Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for count(t, pool, 1)["envelopes"] != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("loop: %v", err)
	}
	if left := count(t, pool, 1, 2); left["envelopes"] != 1 || left["packets"] != 4 || len(sets(t, o.Dir)) != 1 {
		t.Errorf("after the loop: %v left, sets %v; want envelope 2 alone left", left, sets(t, o.Dir))
	}
}
