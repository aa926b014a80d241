package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Cleanups is a daemon's shutdown: a named list of what it closes, run in
// the reverse of the order it was opened (a server before the services it
// calls, those before the clients they use), all sharing one deadline,
// SHUTDOWN_TIMEOUT. Each step's error is logged with its name, and the
// others still run.
type Cleanups struct {
	steps []cleanup
}

type cleanup struct {
	name string
	fn   func(ctx context.Context) error
}

// Add registers a step that may fail or wait; ctx carries the shared
// deadline.
func (c *Cleanups) Add(name string, fn func(ctx context.Context) error) {
	c.steps = append(c.steps, cleanup{name, fn})
}

// AddClose registers a step that cannot fail (a Close without an error).
func (c *Cleanups) AddClose(name string, close func()) {
	c.Add(name, func(context.Context) error { close(); return nil })
}

// Run runs the steps last-added first, all by deadline, and returns their
// errors joined. A step still running at the deadline is reported and left
// behind: the process is about to exit, and waiting longer is what the
// deadline forbids.
func (c *Cleanups) Run(log *zap.Logger, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var errs []error
	for i := len(c.steps) - 1; i >= 0; i-- {
		s := c.steps[i]
		start := time.Now()
		if err := runStep(ctx, s); err != nil {
			log.Error("shutdown step failed", zap.String("step", s.name), zap.Duration("took", time.Since(start)), zap.Error(err))
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			continue
		}
		log.Debug("shutdown step done", zap.String("step", s.name), zap.Duration("took", time.Since(start)))
	}
	c.steps = nil
	return errors.Join(errs...)
}

// runStep runs one step, giving up on it at ctx's deadline.
func runStep(ctx context.Context, s cleanup) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("not run: shutdown deadline passed: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.fn(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("still running at the shutdown deadline: %w", ctx.Err())
	}
}

// ShutdownDeadline returns a function giving the time a daemon's shutdown
// must be over by: timeout (SHUTDOWN_TIMEOUT) after ctx ended. The HTTP
// servers drain within the same timeout from the same moment, so draining
// and the cleanups after it share one budget.
func ShutdownDeadline(ctx context.Context, timeout time.Duration) func() time.Time {
	ended := make(chan time.Time, 1)
	context.AfterFunc(ctx, func() { ended <- time.Now() })
	return func() time.Time {
		select {
		case t := <-ended:
			ended <- t
			return t.Add(timeout)
		default: // not ended: the budget starts now
			return time.Now().Add(timeout)
		}
	}
}

// StartErr is a start-up step's error, or nil when the step was cut short
// by stop (the signals' context) ending: a daemon told to stop while it
// starts (a connection still being tried) stops as told, with exit status
// 0, not as a failure. Any other error stands, signal or not: a migration
// that failed while a stop was on its way is still a failure.
func StartErr(stop context.Context, err error) error {
	if err != nil && stop.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// StopSignals ends a daemon's handling of SIGINT and SIGTERM (stop, from
// signal.NotifyContext) when it returns, ignoring them from then on rather
// than giving them their default action back: a daemon stopping on one
// signal often gets the other too (a terminal's Ctrl-C reaches the whole
// process group, then a supervisor sends SIGTERM), and the second, arriving
// after stop but before the exit, would kill it by signal instead of its
// exit 0.
func StopSignals(stop context.CancelFunc) {
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	stop()
}
