package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A command stopped at its time limit says so, first, and how to give it
// longer, keeping its exit status: what the limit interrupted says only
// "context deadline exceeded". A -timeout of 1ns is spent before the
// command connects (to servers that are not there).
func TestTimeLimitIsExplained(t *testing.T) {
	unreachable(t)
	t.Setenv("LEDGER_RETENTION", "")
	for _, c := range []struct {
		args   []string
		status exitCode
	}{
		{[]string{"audit", "-timeout", "1ns"}, 2},
		{[]string{"retention", "-dry-run", "-older-than", "168h", "-timeout", "1ns"}, 0}, // exit 1
	} {
		commandCtx = nil
		var err error
		msg := stderrOf(t, func() { err = run(c.args) })
		if err == nil {
			t.Fatalf("%q: no error", c.args)
		}
		var status exitCode
		if errors.As(err, &status) != (c.status != 0) || status != c.status {
			t.Errorf("%q: exit status %d, want %d", c.args, status, c.status)
		}
		if first, _, _ := strings.Cut(err.Error(), "\n"); first != "time limit of 1ns reached, the command was stopped; "+
			"-timeout gives it longer (e.g. -timeout 2h)" {
			t.Errorf("%q: %q (stderr %q), want the time limit first", c.args, err, msg)
		}
	}
}

// The fixed limit of the other commands is named as fixed; an error with
// the limit not reached is left alone.
func TestTimeLimitFixed(t *testing.T) {
	ctx, cancel := commandContext(time.Nanosecond, false)
	defer cancel()
	<-ctx.Done()
	err := explainTimeLimit(errors.Join(ctx.Err(), exitCode(1)))
	if !strings.HasPrefix(err.Error(), "time limit of 1ns reached, the command was stopped (the limit is fixed for this command)\n") {
		t.Errorf("%q", err)
	}
	_, cancel = commandContext(time.Hour, false)
	cancel()
	if err := explainTimeLimit(errUsage); err != errUsage {
		t.Errorf("limit not reached: %q", err)
	}
}

// -timeout must be more than 0: refused as a bad flag is, nothing done.
func TestNonPositiveTimeoutRefused(t *testing.T) {
	unreachable(t)
	for _, args := range [][]string{
		{"audit", "-timeout", "0"},
		{"audit", "-timeout", "-1m"},
		{"retention", "-dry-run", "-older-than", "168h", "-timeout", "0"},
	} {
		var err error
		msg := stderrOf(t, func() { err = run(args) })
		if !errors.Is(err, errUsage) || !strings.Contains(msg, "-timeout") || strings.Contains(msg+err.Error(), "127.0.0.1:1") {
			t.Errorf("%q: %v, stderr %q; want exit 2 and the usage", args, err, msg)
		}
	}
}
