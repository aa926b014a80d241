package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// urlVars are the variables that name servers to the tests.
var urlVars = []string{"TEST_DATABASE_URL", "DATABASE_URL", "TEST_REDIS_URL", "REDIS_URL"}

// TestFallbackHelper is the test process TestFallbackStartsServersOfItsOwn
// runs with no server named in its environment; run directly, it does
// nothing.
func TestFallbackHelper(t *testing.T) {
	if os.Getenv("REDPACKET_FALLBACK_HELPER") != "1" {
		return
	}
	for _, v := range urlVars {
		if os.Getenv(v) != "" {
			t.Fatalf("%s is set", v)
		}
	}
	db := PostgresURL(t)
	c, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	var version int
	if err := c.QueryRow(t.Context(), "SELECT version FROM schema_migrations").Scan(&version); err != nil {
		t.Fatalf("the test database has no schema: %v", err)
	}
	rdb, prefix := Redis(t)
	if err := rdb.Set(t.Context(), prefix+":k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(map[string]string{"postgres": pgServer.url, "redis": RedisURL(t)})
	t.Logf("servers %s", out)
}

// With no server named in the environment and no Docker engine, the tests
// start PostgreSQL and Redis of their own on other ports than the
// environment's, and those servers are gone once the test process ends.
func TestFallbackStartsServersOfItsOwn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestFallbackHelper$", "-test.v")
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !slices.Contains(urlVars, name) && name != "DOCKER_HOST" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// No Docker engine, even on a machine that has one: the fallback is
	// what is tested.
	cmd.Env = append(cmd.Env, "REDPACKET_FALLBACK_HELPER=1", "DOCKER_HOST=unix:///nonexistent/docker.sock")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("test process without servers: %v\n%s", err, out.String())
	}
	_, js, ok := strings.Cut(out.String(), "servers ")
	var got map[string]string
	if !ok || json.NewDecoder(strings.NewReader(js)).Decode(&got) != nil {
		t.Fatalf("the helper reported no servers:\n%s", out.String())
	}
	var theirs []string
	for _, v := range urlVars {
		if u, err := url.Parse(os.Getenv(v)); err == nil && u.Host != "" {
			theirs = append(theirs, u.Host)
		}
	}
	var addrs []string
	for kind, s := range got {
		u, err := url.Parse(s)
		if err != nil || u.Hostname() != "127.0.0.1" || u.Port() == "" {
			t.Fatalf("%s server %q: want one on a loopback port", kind, s)
		}
		if slices.Contains(theirs, u.Host) || u.Port() == "5432" || u.Port() == "6379" {
			t.Errorf("%s server %s is not one the test process started", kind, s)
		}
		addrs = append(addrs, u.Host)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range addrs {
		for {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err != nil {
				break
			}
			_ = c.Close()
			if time.Now().After(deadline) {
				t.Fatalf("%s still listening 20s after the test process ended", a)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
