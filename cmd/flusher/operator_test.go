package main

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// stderrOf runs f with os.Stderr going to a file, and returns what f
// wrote there.
func stderrOf(t *testing.T, f func()) string {
	t.Helper()
	file, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	saved := os.Stderr
	os.Stderr = file
	defer func() { os.Stderr = saved }()
	f()
	b, err := os.ReadFile(file.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// unreachable points the settings at servers that are not there, so that
// a command that got past its flags fails to connect instead of touching a
// local database.
func unreachable(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:1/redpacket?sslmode=disable")
	t.Setenv("REDIS_URL", "redis://127.0.0.1:1/0")
	t.Setenv("REDIS_CLUSTER_ADDRS", "")
}

// `flusher audit -since 0` (or negative) would check only the unfinished
// envelopes and still record the run, keeping RedpacketAuditStale quiet:
// it is refused as a bad flag is, exit 2 with the usage, nothing done.
func TestAuditRefusesNonPositiveSince(t *testing.T) {
	unreachable(t)
	for _, since := range []string{"0", "0s", "-5h", "-1ns"} {
		var err error
		msg := stderrOf(t, func() { err = runAudit([]string{"-since", since}) })
		if !errors.Is(err, errUsage) || !strings.Contains(msg, "-since") ||
			!strings.Contains(msg, "usage: flusher audit") || strings.Contains(msg, "127.0.0.1:1") {
			t.Errorf("-since %s: %v, stderr %q; want exit 2 and the usage, nothing connected", since, err, msg)
		}
	}
}
