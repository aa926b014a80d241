package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"redpacket/internal/daemon"
	"redpacket/internal/testenv"
	"redpacket/internal/testenv/throwaway"
)

// privateRedis starts a redis-server of this test's own, whose settings the
// test may change, and returns a client on it.
func privateRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	return testenv.PrivateRedis(t)
}

func configSet(t *testing.T, c *redis.Client, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		if err := c.ConfigSet(t.Context(), kv[i], kv[i+1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// A Redis that may evict keys is refused, whichever evicting policy it has;
// with noeviction the daemon starts and logs one line with the persistence
// it found, GRAB_WAIT_REPLICAS and what a crash would lose.
func TestCheckRedisRefusesAnEvictingPolicy(t *testing.T) {
	t.Parallel()
	c, _ := privateRedis(t)
	for _, policy := range []string{"allkeys-lru", "volatile-ttl", "allkeys-random"} {
		configSet(t, c, "maxmemory-policy", policy)
		err := daemon.CheckRedis(t.Context(), c, zap.NewNop(), 0)
		if !errors.Is(err, daemon.ErrEvictingPolicy) || !strings.Contains(err.Error(), policy) ||
			!strings.Contains(err.Error(), "noeviction") {
			t.Errorf("policy %s: CheckRedis = %v, want ErrEvictingPolicy naming %s and noeviction", policy, err, policy)
		}
	}

	configSet(t, c, "maxmemory-policy", "noeviction", "appendonly", "yes", "appendfsync", "everysec")
	core, logs := observer.New(zap.InfoLevel)
	if err := daemon.CheckRedis(t.Context(), c, zap.New(core), 1); err != nil {
		t.Fatalf("noeviction: %v", err)
	}
	lines := logs.All()
	if len(lines) != 1 || lines[0].Message != "redis settings" {
		t.Fatalf("logged %v, want one line: redis settings", lines)
	}
	f := lines[0].ContextMap()
	if f["appendonly"] != "yes" || f["appendfsync"] != "everysec" || f["grab_wait_replicas"] != int64(1) ||
		!strings.Contains(f["durability"].(string), "about a second") {
		t.Errorf("logged %v, want appendonly yes, everysec, GRAB_WAIT_REPLICAS 1 and its durability", f)
	}
}

// Where CONFIG is refused (managed Redis; here a user whose ACL denies it),
// the daemon says it cannot check and goes on.
func TestCheckRedisGoesOnWithoutConfig(t *testing.T) {
	t.Parallel()
	c, url := privateRedis(t)
	if err := c.Do(t.Context(), "ACL", "SETUSER", "app", "on", ">app-pass", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	opts, err := redis.ParseURL(strings.Replace(url, "redis://", "redis://app:app-pass@", 1))
	if err != nil {
		t.Fatal(err)
	}
	app := redis.NewClient(opts)
	defer app.Close()
	configSet(t, c, "maxmemory-policy", "allkeys-lru") // unseen: the daemon cannot tell
	core, logs := observer.New(zap.InfoLevel)
	if err := daemon.CheckRedis(t.Context(), app, zap.New(core), 0); err != nil {
		t.Fatalf("CONFIG refused: CheckRedis = %v, want it to go on", err)
	}
	lines := logs.All()
	if len(lines) != 1 || lines[0].Level != zap.WarnLevel || !strings.Contains(lines[0].Message, "refused CONFIG") {
		t.Fatalf("logged %v, want one warning that CONFIG was refused", lines)
	}
}

// On a cluster every master is read; the shared test cluster is set up alike
// (noeviction), so one line names all its masters.
func TestCheckRedisReadsEveryClusterMaster(t *testing.T) {
	t.Parallel()
	c := testenv.NewClusterClient(t)
	core, logs := observer.New(zap.InfoLevel)
	if err := daemon.CheckRedis(t.Context(), c, zap.New(core), 0); err != nil {
		t.Fatal(err)
	}
	var masters atomic.Int64
	if err := c.ForEachMaster(t.Context(), func(context.Context, *redis.Client) error { masters.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, l := range logs.All() {
		if l.Message == "redis settings" {
			named += len(l.ContextMap()["masters"].([]any))
		}
	}
	if int64(named) != masters.Load() || named == 0 {
		t.Fatalf("lines %v name %d masters, want all %d", logs.All(), named, masters.Load())
	}
}

// Every master of a cluster is checked: one master of a private cluster set
// to evict is refused, by name; a master that does not answer (paused, as in
// the moments before a failover) is logged and does not stop the start.
func TestCheckRedisClusterEveryMaster(t *testing.T) {
	t.Parallel()
	cl := testenv.PrivateCluster(t, throwaway.ClusterOptions{NodeTimeout: time.Minute})
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs})
	defer c.Close()
	var masters []*redis.Client
	var mu sync.Mutex
	if err := c.ForEachMaster(t.Context(), func(_ context.Context, m *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, m)
		return nil
	}); err != nil || len(masters) != 3 {
		t.Fatalf("masters: %d, %v; want 3", len(masters), err)
	}
	last := masters[2]
	configSet(t, last, "maxmemory-policy", "allkeys-lfu")
	err := daemon.CheckRedis(t.Context(), c, zap.NewNop(), 0)
	if !errors.Is(err, daemon.ErrEvictingPolicy) || !strings.Contains(err.Error(), last.Options().Addr) {
		t.Fatalf("one master of three evicting: CheckRedis = %v, want ErrEvictingPolicy naming %s", err, last.Options().Addr)
	}
	configSet(t, last, "maxmemory-policy", "noeviction")

	paused := masters[0].Options().Addr
	if err := cl.Pause(paused); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cl.Resume(paused) }()
	core, logs := observer.New(zap.InfoLevel)
	if err := daemon.CheckRedis(t.Context(), c, zap.New(core), 0); err != nil {
		t.Fatalf("a master paused: CheckRedis = %v, want it to go on", err)
	}
	warned := false
	for _, l := range logs.All() {
		if l.Level == zap.WarnLevel && strings.Contains(fmt.Sprint(l.ContextMap()["masters"]), paused) {
			warned = true
		}
	}
	if !warned {
		t.Fatalf("logged %v, want a warning naming the paused master %s", logs.All(), paused)
	}
}
