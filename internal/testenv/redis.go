package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"

	"redpacket/internal/testenv/throwaway"
)

var redisServer server

// RedisURL returns the URL of the test Redis server.
func RedisURL(t testing.TB) string {
	t.Helper()
	return redisServer.get(t, []string{"TEST_REDIS_URL", "REDIS_URL"}, startRedis)
}

// Redis returns a client on the test Redis and a key prefix of this test's own.
// Every key of the prefix is deleted when the test ends.
func Redis(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	opts, err := redis.ParseURL(RedisURL(t))
	if err != nil {
		t.Fatalf("testenv: parse redis url: %v", err)
	}
	c := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("testenv: redis ping: %v\n%s", err, howTo)
	}
	prefix := Name("t")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		DeleteKeys(ctx, c, "*"+prefix+"*")
		_ = c.Close()
	})
	return c, prefix
}

// DeleteKeys removes every key matching pattern, a page at a time. On a
// Redis Cluster each master is scanned, since SCAN only sees the keys of the
// node it runs on; the keys are deleted one by one there, as keys of
// different slots may not share a command.
func DeleteKeys(ctx context.Context, c redis.UniversalClient, pattern string) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			deleteScanned(ctx, node, pattern)
			return nil
		})
		return
	}
	deleteScanned(ctx, c, pattern)
}

func deleteScanned(ctx context.Context, c redis.Cmdable, pattern string) {
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
}

func startRedis(ctx context.Context) (string, error) {
	return containerOrLocal(ctx, redisContainer, throwaway.StartRedis)
}

func redisContainer(ctx context.Context) (string, error) {
	c, err := tcredis.Run(ctx, "redis:7")
	if err != nil {
		return "", fmt.Errorf("start Redis container: %w", err)
	}
	return c.ConnectionString(ctx)
}

// PrivateRedis starts a redis-server of this test's own, whose settings the
// test may change (CONFIG SET), and returns a client on it and its URL. It
// is stopped when the test ends.
func PrivateRedis(t testing.TB) (*redis.Client, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv, err := throwaway.StartRedis(ctx)
	if err != nil {
		t.Fatalf("testenv: private Redis: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	opts, err := redis.ParseURL(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c, srv.URL
}
