package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"redpacket/internal/pgstore"
	"redpacket/internal/testenv"
)

// runOut runs a binary to completion (at most 20 s) and returns its exit
// status, standard output and standard error.
func runOut(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	// Built (once per test process) before the clock starts: a build on a
	// busy machine takes longer than the command may.
	path := filepath.Join(binaries(t), bin)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %q still running after 20 s (serving?)\nstdout:\n%s\nstderr:\n%s", bin, args, &stdout, &stderr)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stdout.String(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stdout.String(), stderr.String()
}

// settingsOff are settings a developer may have exported, reset so that each
// test decides.
var settingsOff = []string{"REDIS_CLUSTER_ADDRS=", "GRABBER_API_TOKEN=", "WEBHOOK_URL=", "WEBHOOK_SECRET=",
	"SHORT_ID_MIN=", "SHORT_ID_MAX=", "LOG_LEVEL=info", "GRABBER_AUTH=", "ACCESS_LOG=", "METRICS_ADDR="}

// -h and -version answer and exit 0 without starting anything, whatever the
// settings (here, a PostgreSQL nobody listens on).
func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	env := append(settingsOff, "DATABASE_URL=postgres://u@127.0.0.1:1/x", "GRABBER_ADDR="+freeAddr(t),
		"FLUSHER_ADDR="+freeAddr(t))
	for _, c := range []struct {
		bin  string
		args []string
		want []string // in standard output
		not  []string
	}{
		{"grabber", []string{"-h"}, []string{"usage: grabber", "-version", "GRABBER_ADDR", "GRABBER_MAX_CONNS", "DATABASE_URL", "(default :8080)"},
			[]string{"FLUSH_BATCH_SIZE", "WEBHOOK_URL"}},
		{"grabber", []string{"--help"}, []string{"usage: grabber", "SHORT_ID_MAX"}, nil},
		{"grabber", []string{"-help"}, []string{"usage: grabber"}, nil},
		{"flusher", []string{"-h"}, []string{"usage: flusher", "migrate", "audit", "recover", "-dry-run", "FLUSHER_ADDR",
			"FLUSHER_MAX_CONNS", "WEBHOOK_URL", "FLUSH_BATCH_SIZE", "DATABASE_URL"}, []string{"GRABBER_ADDR", "SHORT_ID_MAX"}},
		{"flusher", []string{"--help"}, []string{"usage: flusher"}, nil},
		{"flusher", []string{"help"}, []string{"usage: flusher"}, nil},
		{"flusher", []string{"recover", "-h"}, []string{"usage: flusher recover", "-envelope", "-action", "-dry-run"}, nil},
		{"flusher", []string{"audit", "-h"}, []string{"usage: flusher audit", "-since", "-all", "-json"}, nil},
		{"grabber", []string{"-version"}, []string{"grabber " + e2eVersion + " commit " + e2eCommit + " go1."}, nil},
		{"flusher", []string{"-version"}, []string{"flusher " + e2eVersion + " commit " + e2eCommit + " go1."}, nil},
		{"grabber", []string{"--version"}, []string{"grabber " + e2eVersion}, nil},
	} {
		code, stdout, stderr := runOut(t, c.bin, env, c.args...)
		if code != 0 || stderr != "" {
			t.Errorf("%s %q: exit %d, stderr %q; want 0 and nothing", c.bin, c.args, code, stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(stdout, w) {
				t.Errorf("%s %q: output lacks %q:\n%s", c.bin, c.args, w, stdout)
			}
		}
		for _, n := range c.not {
			if strings.Contains(stdout, n) {
				t.Errorf("%s %q: output lists %s, which it does not read", c.bin, c.args, n)
			}
		}
	}
}

// A command with a stray word or an unknown flag does nothing: its usage on
// standard error, exit status 2. Above all an irreversible one: in
// `recover -envelope N -action refund now -dry-run`, "now" used to end the
// flags, -dry-run went unread, and the envelope was refunded for real.
func TestStrayArguments(t *testing.T) {
	t.Parallel()
	pool, dbURL := testenv.Postgres(t)
	_, prefix := testenv.Redis(t)
	env := append(settingsOff, "DATABASE_URL="+dbURL, "REDIS_URL="+testenv.RedisURL(t), "REDIS_KEY_PREFIX="+prefix,
		"GRABBER_ADDR="+freeAddr(t), "FLUSHER_ADDR="+freeAddr(t))
	ctx := context.Background()
	const id = 7_000_000_001
	now := time.Now().UTC().Truncate(time.Millisecond)
	pg := pgstore.New(pool)
	if err := pg.InsertEnvelope(ctx, pgstore.Envelope{ID: id, Shard: int(id % 16), SenderID: "s", TotalCents: 300, Count: 3,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}, 9_000_000_000_001, []int64{100, 100, 100}); err != nil {
		t.Fatal(err)
	}
	if changed, err := pg.Suspend(ctx, id, "test", now); err != nil || !changed {
		t.Fatalf("suspend: %v %v", changed, err)
	}
	status := func() string {
		t.Helper()
		e, err := pg.Envelope(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return e.Status.String()
	}
	n := fmt.Sprint(id)
	for _, c := range []struct {
		bin   string
		args  []string
		usage string
	}{
		{"flusher", []string{"recover", "-envelope", n, "-action", "refund", "now", "-dry-run"}, "usage: flusher recover"},
		{"flusher", []string{"recover", "-envelope", n, "now", "-action", "refund"}, "usage: flusher recover"},
		{"flusher", []string{"recover", "-envelope", n, "-action", "refund", "-dryrun"}, "usage: flusher recover"},
		{"flusher", []string{"recover", "-envelope", n}, "usage: flusher recover"},
		{"flusher", []string{"audit", "extra"}, "usage: flusher audit"},
		{"flusher", []string{"audit", "-all", "extra", "-json"}, "usage: flusher audit"},
		{"flusher", []string{"migrate", "now"}, "usage: flusher migrate"},
		{"flusher", []string{"migrate", "-x"}, "usage: flusher migrate"},
		{"flusher", []string{"refund"}, "usage: flusher"},
		{"flusher", []string{"-dry-run", "recover"}, "usage: flusher"},
		{"flusher", []string{"-version", "extra"}, "usage: flusher"},
		{"grabber", []string{"serve"}, "usage: grabber"},
		{"grabber", []string{"-version", "now"}, "usage: grabber"},
		{"grabber", []string{"-addr", ":1"}, "usage: grabber"},
	} {
		code, stdout, stderr := runOut(t, c.bin, env, c.args...)
		if code != 2 || !strings.Contains(stderr, c.usage) || stdout != "" {
			t.Errorf("%s %q: exit %d, stdout %q, stderr:\n%s\nwant exit 2, nothing on stdout, %q on stderr",
				c.bin, c.args, code, stdout, stderr, c.usage)
		}
		if s := status(); s != "suspended" {
			t.Fatalf("after %s %q the envelope is %s, want still suspended", c.bin, c.args, s)
		}
	}
	// The same without the stray word is a dry run indeed.
	code, stdout, stderr := runOut(t, "flusher", env, "recover", "-envelope", n, "-action", "refund", "-dry-run")
	if code != 0 || !strings.Contains(stdout, "dry run: nothing changed") || status() != "suspended" {
		t.Errorf("recover -dry-run: exit %d, status %s\n%s%s", code, status(), stdout, stderr)
	}
}

// A setting out of range or of the wrong shape stops a daemon at start with
// a message naming it and exit status 2, never a panic; no secret appears in
// what it prints.
func TestSettingsRefused(t *testing.T) {
	t.Parallel()
	_, dbURL := testenv.Postgres(t)
	_, prefix := testenv.Redis(t)
	base := append(settingsOff, "DATABASE_URL="+dbURL, "REDIS_URL="+testenv.RedisURL(t), "REDIS_KEY_PREFIX="+prefix,
		"GRABBER_ADDR="+freeAddr(t), "FLUSHER_ADDR="+freeAddr(t))
	const secret = "hunter2x"
	for _, c := range []struct {
		bin  string
		args []string
		env  []string
		name string // the variable the message names
	}{
		{"grabber", nil, []string{"SHORT_ID_MIN=1", "SHORT_ID_MAX=9999999999"}, "SHORT_ID_MAX"},
		{"grabber", nil, []string{"GRAB_BATCH_MAX=0"}, "GRAB_BATCH_MAX"},
		{"grabber", nil, []string{"GRABBER_MAX_CONNS=-5"}, "GRABBER_MAX_CONNS"},
		{"grabber", nil, []string{"LOG_LEVEL=verbose"}, "LOG_LEVEL"},
		{"grabber", nil, []string{"GRABBER_API_TOKEN=" + secret + " two"}, "GRABBER_API_TOKEN"},
		{"grabber", nil, []string{"REDIS_URL=redis://:hun ter2x@127.0.0.1:6379/0"}, "REDIS_URL"},
		{"grabber", nil, []string{"REDIS_URL=redis://:" + secret + "@127.0.0.1:6379/zz"}, "REDIS_URL"},
		{"flusher", nil, []string{"FLUSHER_MAX_CONNS=0"}, "FLUSHER_MAX_CONNS"},
		{"flusher", nil, []string{"SETTLED_KEY_TTL=1ms"}, "SETTLED_KEY_TTL"},
		{"flusher", nil, []string{"LEDGER_RETENTION=2160h", "LEDGER_ARCHIVE_DIR=/nonexistent/archive"}, "LEDGER_ARCHIVE_DIR"},
		{"flusher", nil, []string{"LEDGER_RETENTION=24h"}, "EVENTS_RETENTION"}, // shorter than the default 168h
		{"flusher", []string{"retention", "-older-than", "48h", "-dry-run"}, nil, "EVENTS_RETENTION"},
		// A key=value connection string is refused without its password shown.
		{"flusher", []string{"migrate"}, []string{"DATABASE_URL=host=db user=app password=" + secret}, "DATABASE_URL"},
		{"flusher", nil, []string{"WEBHOOK_URL=ftp://u:" + secret + "@hooks.example/x?token=" + secret, "WEBHOOK_SECRET=0123456789abcdef"}, "WEBHOOK_URL"},
		{"flusher", nil, []string{"WEBHOOK_URL=https://hooks.example/x?token=" + secret, "WEBHOOK_SECRET=" + secret}, "WEBHOOK_SECRET"},
		{"flusher", []string{"migrate"}, []string{"DATABASE_URL=postgres://u:hun ter2x@127.0.0.1/x"}, "DATABASE_URL"},
		{"flusher", []string{"migrate"}, []string{"DATABASE_URL=postgres://u:" + secret + "@127.0.0.1/x?sslmode=bogus"}, "DATABASE_URL"},
		{"flusher", []string{"audit"}, []string{"ORDER_NO_WIDTH=19"}, "ORDER_NO_WIDTH"},
		{"flusher", []string{"recover", "-envelope", "1", "-action", "refund"}, []string{"REDIS_POOL_SIZE=0"}, "REDIS_POOL_SIZE"},
	} {
		code, stdout, stderr := runOut(t, c.bin, append(base, c.env...), c.args...)
		out := stdout + stderr
		if code != 2 || !strings.Contains(stderr, c.name) {
			t.Errorf("%s %q with %q: exit %d, want 2 and a message naming %s:\n%s", c.bin, c.args, c.env, code, c.name, out)
		}
		for _, bad := range []string{"panic", "goroutine ", secret, "hun ter2x", "hun%20ter2x"} {
			if strings.Contains(out, bad) {
				t.Errorf("%s %q with %q: output holds %q:\n%s", c.bin, c.args, c.env, bad, out)
			}
		}
	}
}
