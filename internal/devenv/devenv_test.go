package devenv

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// Only one of DATABASE_URL and REDIS_URL (or REDIS_CLUSTER_ADDRS) set pairs
// a real server with a throwaway one: Run refuses it before starting
// anything (Bin names no binaries, so anything started would fail
// otherwise), saying to set both or neither.
func TestRunRefusesOnlyOneServer(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"only DATABASE_URL":        {"DATABASE_URL": "postgres://postgres@127.0.0.1:1/real?sslmode=disable"},
		"only REDIS_URL":           {"REDIS_URL": "redis://127.0.0.1:1/0"},
		"only REDIS_CLUSTER_ADDRS": {"REDIS_CLUSTER_ADDRS": "127.0.0.1:1,127.0.0.1:2"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, logs bytes.Buffer
			err := Run(context.Background(), Config{Bin: t.TempDir(), Getenv: func(k string) string { return vars[k] },
				Out: &out, Logs: &logs})
			var refused *SettingsError
			if !errors.As(err, &refused) {
				t.Fatalf("Run: %v, want a *SettingsError", err)
			}
			for _, want := range []string{"DATABASE_URL", "REDIS_URL", "set both", "or neither"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if out.Len() > 0 || logs.Len() > 0 {
				t.Errorf("Run said something, so it started something:\n%s%s", out.String(), logs.String())
			}
		})
	}
}

// Both set, or neither, passes the check (Run then uses the servers named,
// or starts its own).
func TestCheckServersBothOrNeither(t *testing.T) {
	for _, vars := range []map[string]string{
		{},
		{"DATABASE_URL": "postgres://x@h/db", "REDIS_URL": "redis://h:6379/0"},
		{"DATABASE_URL": "postgres://x@h/db", "REDIS_CLUSTER_ADDRS": "h:7000"},
		{"DATABASE_URL": "postgres://x@h/db", "REDIS_URL": "redis://h:6379/0", "REDIS_CLUSTER_ADDRS": "h:7000"},
	} {
		if err := checkServers(func(k string) string { return vars[k] }); err != nil {
			t.Errorf("%v: %v", vars, err)
		}
	}
}
