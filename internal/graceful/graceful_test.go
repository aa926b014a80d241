package graceful

import (
	"context"
	"testing"
	"time"
)

// Work in hand when its parent ends goes on (it is not cut at the stop)
// but ends the grace after it, not at its timeout.
func TestDetachedEndsWithinTheGrace(t *testing.T) {
	t.Parallel()
	parent, stop := context.WithCancel(context.Background())
	ctx, cancel := Detached(parent, time.Minute, 300*time.Millisecond)
	defer cancel()
	stopped := time.Now() // before the stop: the grace may start before a reading after it
	stop()
	select {
	case <-ctx.Done():
		t.Fatal("the work's context ended with the stop, not after its grace")
	case <-time.After(100 * time.Millisecond):
	}
	select {
	case <-ctx.Done():
		if took := time.Since(stopped); took < 300*time.Millisecond {
			t.Errorf("ended %s after the stop, before the grace of 300ms", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the work's context still open 5 s after the stop, with a grace of 300ms")
	}
}

// Without a stop, or with no grace, the timeout alone ends it.
func TestDetachedTimeout(t *testing.T) {
	t.Parallel()
	for _, grace := range []time.Duration{300 * time.Millisecond, 0} {
		parent, stop := context.WithCancel(context.Background())
		ctx, cancel := Detached(parent, time.Minute, grace)
		if grace == 0 {
			stop()
			time.Sleep(50 * time.Millisecond)
			if ctx.Err() != nil {
				t.Errorf("grace 0: ended with its parent")
			}
		}
		if d, ok := ctx.Deadline(); !ok || time.Until(d) < 59*time.Second {
			t.Errorf("grace %v: deadline %v (%v), want a minute from now", grace, d, ok)
		}
		cancel()
		stop()
	}
}
