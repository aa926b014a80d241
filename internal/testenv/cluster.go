package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/testenv/throwaway"
)

const howToCluster = "set TEST_REDIS_CLUSTER_ADDRS to the seed nodes of a Redis Cluster " +
	"(e.g. run `.ci/redis-cluster start` and export TEST_REDIS_CLUSTER_ADDRS=$(.ci/redis-cluster addrs)), " +
	"or put redis-server and redis-cli (Redis 7) on PATH so the tests start a throwaway cluster of their own"

// clusterServer is the test Redis Cluster, found once per test process.
var clusterServer struct {
	once  sync.Once
	addrs []string
	err   error
}

// RedisClusterAddrs returns the seed addresses of the test Redis Cluster:
// TEST_REDIS_CLUSTER_ADDRS or REDIS_CLUSTER_ADDRS (comma-separated host:port)
// from the environment; otherwise a cluster of 3 masters and 3 replicas on
// free loopback ports that this test process starts with redis-server and
// redis-cli from PATH, once, and that goes away when the process ends (see
// throwaway.StartCluster). Without either the test fails, saying how to
// provide one.
func RedisClusterAddrs(t testing.TB) []string {
	t.Helper()
	clusterServer.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for _, v := range []string{"TEST_REDIS_CLUSTER_ADDRS", "REDIS_CLUSTER_ADDRS"} {
			if addrs := splitAddrs(os.Getenv(v)); len(addrs) > 0 {
				clusterServer.addrs = addrs
				if err := clusterAnswers(ctx, addrs); err != nil {
					clusterServer.err = fmt.Errorf("%s=%s: %w", v, os.Getenv(v), err)
				}
				return
			}
		}
		c, err := throwaway.StartCluster(ctx, throwaway.ClusterOptions{})
		if err != nil {
			clusterServer.err = fmt.Errorf("no cluster in the environment, and cannot start one: %w", err)
			return
		}
		clusterServer.addrs = c.Addrs
	})
	if clusterServer.err != nil {
		t.Fatalf("testenv: no Redis Cluster: %v\n%s", clusterServer.err, howToCluster)
	}
	return clusterServer.addrs
}

// RedisCluster returns a client on the test Redis Cluster and a key prefix of
// this test's own. Every key of the prefix, on every master, is deleted when
// the test ends.
func RedisCluster(t testing.TB) (redis.UniversalClient, string) {
	t.Helper()
	c := NewClusterClient(t)
	prefix := Name("t")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		DeleteKeys(ctx, c, "*"+prefix+"*")
	})
	return c, prefix
}

// NewClusterClient returns another client on the test Redis Cluster, as a
// second process of the service would have; it is closed when the test ends.
func NewClusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: RedisClusterAddrs(t)})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Every master must answer, not only the first seed.
	if err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		return n.Ping(ctx).Err()
	}); err != nil {
		_ = c.Close()
		t.Fatalf("testenv: redis cluster ping: %v\n%s", err, howToCluster)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// clusterAnswers checks that the seeds lead to a Redis Cluster serving every
// slot: a plain Redis, or a cluster still forming, fails here with a clear
// message rather than later with MOVED or CLUSTERDOWN errors.
func clusterAnswers(ctx context.Context, addrs []string) error {
	var last error
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		info, err := c.ClusterInfo(ctx).Result()
		_ = c.Close()
		if err != nil {
			last = fmt.Errorf("%s: CLUSTER INFO: %w", a, err)
			continue
		}
		f := infoFields(info)
		if f["cluster_state"] != "ok" || f["cluster_slots_ok"] != "16384" {
			return fmt.Errorf("%s: cluster_state %s, %s of 16384 slots ok", a, f["cluster_state"], f["cluster_slots_ok"])
		}
		return nil
	}
	return last
}

// infoFields parses the "name:value" lines of an INFO-style reply.
func infoFields(info string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// PrivateCluster starts a Redis Cluster of this test's own (3 masters, 3
// replicas; see throwaway.StartCluster) whose nodes the test may kill,
// pause, restart and cut off, never the shared test cluster. It is stopped
// and its directory removed when the test ends; the end of each node's log
// goes to the test log if the test failed.
func PrivateCluster(t testing.TB, opts throwaway.ClusterOptions) *throwaway.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c, err := throwaway.StartCluster(ctx, opts)
	if err != nil {
		t.Fatalf("testenv: private Redis Cluster: %v\n%s", err, howToCluster)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("private cluster logs:%s", c.Logs(30))
		}
		if err := c.Stop(); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	return c
}
