// Package testenv gives tests real PostgreSQL and Redis servers.
//
// Servers are found in this order:
//
//  1. TEST_DATABASE_URL / DATABASE_URL and TEST_REDIS_URL / REDIS_URL from
//     the environment;
//  2. otherwise containers started with testcontainers-go, when a Docker
//     engine is reachable;
//  3. otherwise throwaway servers this test process starts for itself
//     (package throwaway): initdb + postgres and redis-server on free
//     loopback ports, in temporary directories removed when the process
//     ends, however it ends;
//  4. otherwise the test fails with a message saying how to provide them.
//
// Tests are never skipped. A run with no URLs set never touches a server it
// did not start.
//
// Each test gets its own database (cloned from a migrated template) and its own
// Redis key prefix, so tests run in parallel and never flush a shared server.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"redpacket/internal/testenv/throwaway"
)

const howTo = "set TEST_DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable) " +
	"and TEST_REDIS_URL (e.g. redis://127.0.0.1:6379/0), or make a Docker engine reachable for testcontainers, " +
	"or install PostgreSQL's server programs (initdb and postgres, on PATH or under /usr/lib/postgresql/*/bin) " +
	"and redis-server (Redis 7) so that the tests start throwaway servers of their own"

// server is a lazily found server URL, shared by every test of the process.
type server struct {
	once sync.Once
	url  string
	err  error
}

func (s *server) get(t testing.TB, envVars []string, start func(context.Context) (string, error)) string {
	t.Helper()
	s.once.Do(func() {
		for _, v := range envVars {
			if u := os.Getenv(v); u != "" {
				s.url = u
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		s.url, s.err = start(ctx)
	})
	if s.err != nil {
		t.Fatalf("testenv: no server: %v\n%s", s.err, howTo)
	}
	return s.url
}

// containerOrLocal returns the URL of a container if container can start
// one, else of a throwaway server of this process, which lives until the
// process ends.
func containerOrLocal(ctx context.Context, container func(context.Context) (string, error),
	local func(context.Context) (*throwaway.Server, error)) (string, error) {
	u, cerr := container(ctx)
	if cerr == nil {
		return u, nil
	}
	s, lerr := local(ctx)
	if lerr != nil {
		return "", fmt.Errorf("no container (%v), and no throwaway server: %w", cerr, lerr)
	}
	return s.URL, nil
}

// Name returns a short random name, safe as a database name or key prefix.
func Name(kind string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return kind + hex.EncodeToString(b)
}
