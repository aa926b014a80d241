package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestCleanupsRunInReverseAndReportEachFailure(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	var c Cleanups
	var order []string
	c.AddClose("clients", func() { order = append(order, "clients") })
	c.Add("flusher", func(context.Context) error { order = append(order, "flusher"); return errors.New("boom") })
	c.Add("server", func(context.Context) error { order = append(order, "server"); return nil })
	err := c.Run(zap.New(core), time.Now().Add(time.Second))
	if got := strings.Join(order, ","); got != "server,flusher,clients" {
		t.Errorf("order %s, want server,flusher,clients", got)
	}
	if err == nil || !strings.Contains(err.Error(), "flusher: boom") {
		t.Errorf("Run = %v, want the flusher's error named", err)
	}
	if logs.Len() != 1 || logs.All()[0].ContextMap()["step"] != "flusher" {
		t.Errorf("logged %v, want one error line naming the flusher", logs.All())
	}
}

func TestCleanupsShareOneDeadline(t *testing.T) {
	var c Cleanups
	ran := false
	c.AddClose("after", func() { ran = true })
	c.Add("stuck", func(ctx context.Context) error { <-ctx.Done(); time.Sleep(time.Second); return nil })
	start := time.Now()
	err := c.Run(zap.NewNop(), time.Now().Add(50*time.Millisecond))
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Run took %v past a 50ms deadline", took)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "stuck") {
		t.Errorf("Run = %v, want the stuck step reported at the deadline", err)
	}
	if ran || !strings.Contains(err.Error(), "after: not run") {
		t.Errorf("a step after the deadline ran (%v) or was not reported: %v", ran, err)
	}
}

func TestShutdownDeadlineCountsFromTheEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	deadline := ShutdownDeadline(ctx, time.Minute)
	time.Sleep(20 * time.Millisecond)
	before := time.Now()
	cancel()
	// The first ask comes 600 ms after the end, so a deadline counted from
	// it is told apart from one counted from the end even if the goroutine
	// that reads the end ran up to 500 ms late (a loaded machine).
	time.Sleep(600 * time.Millisecond)
	for range 2 { // asked twice, the same answer
		// A minute after the end, not after the first ask.
		if d := deadline(); d.Before(before.Add(time.Minute)) || d.After(before.Add(time.Minute+500*time.Millisecond)) {
			t.Fatalf("deadline %v, want a minute after %v", d, before)
		}
	}
}

// A step cut short by the stop is no failure; any other error stands, stop
// or not (a migration that failed while a stop was on its way).
func TestStartErr(t *testing.T) {
	t.Parallel()
	stop, cancel := context.WithCancel(context.Background())
	failed := errors.New("migration 21 failed")
	cut := fmt.Errorf("connect: %w", context.Canceled)
	if err := StartErr(stop, cut); !errors.Is(err, context.Canceled) {
		t.Errorf("cut short before any stop: %v, want it kept", err)
	}
	cancel()
	if err := StartErr(stop, cut); err != nil {
		t.Errorf("cut short by the stop: %v, want nil", err)
	}
	if err := StartErr(stop, failed); !errors.Is(err, failed) {
		t.Errorf("failed while stopping: %v, want it kept", err)
	}
}
