package testenv

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// keysPerMaster counts the keys matching pattern on each master.
func keysPerMaster(t *testing.T, c *redis.ClusterClient, pattern string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	out := map[string]int{}
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n := 0
		iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			n++
		}
		mu.Lock()
		out[node.Options().Addr] = n
		mu.Unlock()
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The keys a test made under its prefix lie on every master; all of them are
// gone when the test ends, not only those of the node SCAN happened to reach.
func TestRedisClusterDeletesKeysOnEveryMaster(t *testing.T) {
	t.Parallel()
	var prefix string
	t.Run("write", func(t *testing.T) {
		var rdb redis.UniversalClient
		rdb, prefix = RedisCluster(t)
		ctx := t.Context()
		for i := range 64 {
			if err := rdb.Set(ctx, fmt.Sprintf("{%s:s%d}:k", prefix, i), i, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
		}
		per := keysPerMaster(t, rdb.(*redis.ClusterClient), "*"+prefix+"*")
		total := 0
		for addr, n := range per {
			if n == 0 {
				t.Errorf("master %s holds none of the 64 keys: %v", addr, per)
			}
			total += n
		}
		if len(per) < 3 || total != 64 {
			t.Fatalf("keys per master %v; want 64 keys over at least 3 masters", per)
		}
	})
	if prefix == "" {
		t.FailNow()
	}
	for addr, n := range keysPerMaster(t, NewClusterClient(t), "*"+prefix+"*") {
		if n != 0 {
			t.Errorf("master %s still holds %d keys of the finished test", addr, n)
		}
	}
}
