package daemon_test

import (
	"testing"

	"redpacket/internal/daemon"
	"redpacket/internal/testenv"
)

// How full Redis is: used_memory over maxmemory, 0 without a maxmemory.
func TestRedisMemory(t *testing.T) {
	t.Parallel()
	c, _ := privateRedis(t)
	clients := &daemon.Clients{Redis: c}
	configSet(t, c, "maxmemory", "0")
	if r, err := clients.RedisMemory(t.Context()); err != nil || r != 0 {
		t.Errorf("without maxmemory: %v, %v; want 0", r, err)
	}
	configSet(t, c, "maxmemory", "100mb")
	r, err := clients.RedisMemory(t.Context())
	if err != nil || r <= 0 || r >= 0.5 {
		t.Errorf("an idle Redis under 100mb: %v, %v; want a small positive share", r, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := clients.RedisMemory(t.Context()); err == nil {
		t.Error("a closed client answered how full Redis is")
	}
}

// A cluster answers for its fullest master.
func TestRedisMemoryOfACluster(t *testing.T) {
	t.Parallel()
	c, _ := testenv.RedisCluster(t)
	if r, err := (&daemon.Clients{Redis: c}).RedisMemory(t.Context()); err != nil || r < 0 {
		t.Errorf("a cluster's memory: %v, %v", r, err)
	}
}
