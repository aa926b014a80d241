package e2e_test

import (
	"context"
	"encoding/json"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/testenv"
	"redpacket/internal/testenv/throwaway"
	"redpacket/migrations"
)

// logLine is what every line a daemon writes must parse as.
type logLine struct {
	Level string `json:"level"`
	Msg   string `json:"msg"`
	Error string `json:"error"`
}

// requireJSONLog fails unless every line of out is a JSON log line, and
// returns them.
func requireJSONLog(t *testing.T, what, out string) []logLine {
	t.Helper()
	var lines []logLine
	for _, raw := range strings.Split(strings.TrimSpace(out), "\n") {
		var l logLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil || l.Level == "" || l.Msg == "" {
			t.Errorf("%s: a line that is no JSON log line: %q\nall of it:\n%s", what, raw, out)
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

// A daemon that cannot start says why in JSON, like every line it writes,
// and its last line is at level error; it exits 1. Here Redis is
// unreachable (a loopback port nobody listens on), or it may evict keys
// (a redis-server of this test's own set to allkeys-lru).
func TestStartupFailureLogsJSON(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	evicting, err := throwaway.StartRedis(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = evicting.Stop() })
	opts, _ := redis.ParseURL(evicting.URL)
	rc := redis.NewClient(opts)
	defer rc.Close()
	if err := rc.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}

	prefix := testenv.Name("t") // the one every process of the database must share
	for _, c := range []struct {
		name, redisURL, want string // want: in the last line's error
	}{
		{"redis unreachable", "redis://" + freeAddr(t) + "/0", "redis"},
		{"redis evicts", evicting.URL, "noeviction"},
	} {
		for _, bin := range []string{"grabber", "flusher"} {
			env := append(settingsOff, "DATABASE_URL="+dbURL, "REDIS_URL="+c.redisURL, "REDIS_KEY_PREFIX="+prefix,
				"GRABBER_ADDR="+freeAddr(t), "FLUSHER_ADDR="+freeAddr(t))
			code, stdout, stderr := runOut(t, bin, env)
			what := bin + ", " + c.name
			if stdout != "" {
				t.Errorf("%s: wrote to standard output: %q", what, stdout)
			}
			lines := requireJSONLog(t, what, stderr)
			if code != 1 || len(lines) == 0 {
				t.Errorf("%s: exit %d with %d log lines, want 1 and a last line at level error:\n%s", what, code, len(lines), stderr)
				continue
			}
			last := lines[len(lines)-1]
			if last.Level != "error" || !strings.Contains(last.Error, c.want) {
				t.Errorf("%s: last line %+v, want level error with an error naming %q", what, last, c.want)
			}
		}
	}
}

// flusher migrate says which migrations it applied, by version and name,
// and that the schema is up to date only when it applied none.
func TestMigrateSaysWhatItApplied(t *testing.T) {
	t.Parallel()
	env := append(settingsOff, "DATABASE_URL="+testenv.EmptyPostgresURL(t))
	code, _, stderr := runOut(t, "flusher", env, "migrate")
	lines := requireJSONLog(t, "first migrate", stderr)
	if code != 0 || len(lines) != 1 || lines[0].Msg != "applied migrations" ||
		!strings.Contains(stderr, `"000001_core"`) || !strings.Contains(stderr, `"count":`+strconv.Itoa(migrations.Version)) {
		t.Fatalf("first migrate: exit %d, log:\n%s\nwant one line naming all %d migrations applied", code, stderr, migrations.Version)
	}
	code, _, stderr = runOut(t, "flusher", env, "migrate")
	lines = requireJSONLog(t, "second migrate", stderr)
	if code != 0 || len(lines) != 1 || !strings.Contains(lines[0].Msg, "up to date") {
		t.Fatalf("second migrate: exit %d, log:\n%s\nwant one line: up to date", code, stderr)
	}
}

// A flusher whose FLUSH_WRITERS take every connection of its pool says so
// at start, naming both numbers, and runs; with pgx's default pool (at
// least 4 connections) and the default two writers it says nothing.
func TestFlusherWarnsWhenItsWritersFillItsPool(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	_, prefix := testenv.Redis(t) // its keys are deleted when the test ends
	for _, c := range []struct {
		name, pool string
		warn       bool
	}{
		{"pool of 2", "2", true},
		{"default pool", "", false},
	} {
		u, err := url.Parse(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		if c.pool != "" {
			q := u.Query()
			q.Set("pool_max_conns", c.pool)
			u.RawQuery = q.Encode()
		}
		addr := freeAddr(t)
		env := append(append([]string{}, settingsOff...), "DATABASE_URL="+u.String(), "REDIS_URL="+testenv.RedisURL(t),
			"REDIS_KEY_PREFIX="+prefix, "FLUSHER_ADDR="+addr, "FLUSH_WRITERS=2")
		p := start(t, "flusher", env)
		waitReady(t, "http://"+addr+"/readyz")
		p.stop(t)
		out := p.out.String()
		warned := strings.Contains(out, "FLUSH_WRITERS leaves the flusher's pool no connection")
		if warned != c.warn || (c.warn && !strings.Contains(out, `"flush_writers":2,"pool_max_conns":2`)) {
			t.Errorf("%s: warned %v, want %v; log:\n%s", c.name, warned, c.warn, out)
		}
	}
}

// A daemon told to stop while it is still starting (here: waiting for a
// Redis that accepts connections and never answers) stops as told, exit 0,
// not as a failure.
func TestStopWhileStarting(t *testing.T) {
	t.Parallel()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	go func() {
		var held []net.Conn // held open, never answered, closed with the listener's test
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	dbURL := testenv.PostgresURL(t)
	for _, bin := range []string{"grabber", "flusher"} {
		env := append(settingsOff, "DATABASE_URL="+dbURL, "REDIS_URL=redis://"+silent.Addr().String()+"/0",
			"REDIS_KEY_PREFIX="+testenv.Name("t"), "GRABBER_ADDR="+freeAddr(t), "FLUSHER_ADDR="+freeAddr(t))
		p := start(t, bin, env)
		time.Sleep(1500 * time.Millisecond) // migrated (the flusher), and waiting for Redis
		p.stop(t)
	}
}
