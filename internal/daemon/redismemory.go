package daemon

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// RedisMemory is the fullest master's used_memory over its maxmemory (0
// for a master without maxmemory), read with INFO memory, answered by the
// end of ctx at the latest (see checkRedis).
func (c *Clients) RedisMemory(ctx context.Context) (float64, error) {
	type answer struct {
		ratio float64
		err   error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := redisMemory(ctx, c.Redis)
		done <- answer{r, err}
	}()
	select {
	case a := <-done:
		return a.ratio, a.err
	case <-ctx.Done():
		return 0, fmt.Errorf("redis memory: no answer in time: %w", context.Cause(ctx))
	}
}

// redisMemory is masterMemory of a single server, or the most of the
// masters of a cluster that answered: one that does not must not hide
// another that fills up (readiness reports the one down).
func redisMemory(ctx context.Context, c redis.UniversalClient) (float64, error) {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return masterMemory(ctx, c)
	}
	var mu sync.Mutex
	most, answered := 0.0, 0
	var last error
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		r, err := masterMemory(ctx, m)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			last = fmt.Errorf("master %s: %w", m.Options().Addr, err)
			return nil
		}
		most, answered = max(most, r), answered+1
		return nil
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("redis memory: %w", err)
	case answered == 0 && last != nil:
		return 0, last
	}
	return most, nil
}

// masterMemory reads one master's used_memory / maxmemory.
func masterMemory(ctx context.Context, c redis.Cmdable) (float64, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("redis memory: %w", err)
	}
	var used, limit float64
	for line := range strings.SplitSeq(info, "\n") {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "used_memory":
			used, err = strconv.ParseFloat(value, 64)
		case "maxmemory":
			limit, err = strconv.ParseFloat(value, 64)
		}
		if err != nil {
			return 0, fmt.Errorf("redis memory: %s %q: %w", name, value, err)
		}
	}
	if limit <= 0 {
		return 0, nil
	}
	return used / limit, nil
}
