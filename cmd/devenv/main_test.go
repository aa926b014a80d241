package main

import (
	"bytes"
	"strings"
	"testing"
)

// Only one of DATABASE_URL and REDIS_URL set: exit 2 (a setting refused, as
// the daemons exit for one), the reason on standard error, nothing on
// standard output and nothing started (-bin names no binaries).
func TestOnlyOneServerIsExit2(t *testing.T) {
	for _, vars := range []map[string]string{
		{"DATABASE_URL": "postgres://postgres@127.0.0.1:1/real?sslmode=disable"},
		{"REDIS_URL": "redis://127.0.0.1:1/0"},
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"-bin", t.TempDir()}, func(k string) string { return vars[k] }, &stdout, &stderr)
		if code != 2 || stdout.Len() > 0 {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", vars, code, stdout.String())
		}
		if msg := stderr.String(); !strings.HasPrefix(msg, "devenv: ") || !strings.Contains(msg, "set both") ||
			strings.Count(msg, "\n") != 1 {
			t.Errorf("%v: stderr %q, want one line saying to set both or neither", vars, msg)
		}
	}
}
