// Package graceful gives work in hand when a daemon is told to stop a
// context that outlives the stop for a while, so that it is finished
// rather than cut off half-way.
package graceful

import (
	"context"
	"time"
)

// Detached is a context for one piece of work: detached from parent, so
// that work under way when parent ends (a stop signal) is finished, but
// ended timeout after it starts or grace after parent ends, whichever comes
// first. A grace of 0 or of timeout or more leaves timeout alone to end it.
func Detached(parent context.Context, timeout, grace time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), timeout)
	if grace <= 0 || grace >= timeout {
		return ctx, cancel
	}
	// Once parent ends, wait out the grace or the work, whichever ends
	// first: the wait never outlives the work.
	stop := context.AfterFunc(parent, func() {
		select {
		case <-ctx.Done():
		case <-time.After(grace):
			cancel()
		}
	})
	return ctx, func() {
		stop()
		cancel()
	}
}
