package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A grab that passed the stop check just before the stop and then found
// room in the queue is in no worker's hands: it is refused at once, not
// left waiting until its caller's deadline.
func TestGrabQueuedAsTheCoalescerStopsIsRefused(t *testing.T) {
	s := &Store{}
	stop := s.Coalesce(1, 4)
	c := s.coalescer
	stop()
	c.quit = make(chan struct{}) // as the late caller saw it; the workers are gone
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	r := c.grab(ctx, grabCall{})
	if !errors.Is(r.err, redis.ErrClosed) {
		t.Fatalf("grab queued after the stop = %v, want redis.ErrClosed", r.err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("grab queued after the stop answered after %v", d)
	}
}
