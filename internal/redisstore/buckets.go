package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// errStaleBuckets is a grab the script refused because it named the
// envelope's claims by another number of buckets than the meta records
// (grab.lua's STALE): the grab path reads the number again and retries.
var errStaleBuckets = errors.New("claim buckets of the envelope changed")

// bucketCache remembers each envelope's number of claim buckets, which
// never changes once loaded, so a grab names its user's claims hash without
// asking Redis first. It is cleared whole when full: a miss costs one HGET.
type bucketCache struct {
	mu sync.Mutex
	m  map[int64]int
}

const bucketCacheMax = 1 << 16

func (c *bucketCache) get(id int64) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.m[id]
	return n, ok
}

func (c *bucketCache) put(id int64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= bucketCacheMax {
		c.m = make(map[int64]int)
	}
	c.m[id] = n
}

func (c *bucketCache) forget(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// buckets is the envelope's number of claim buckets as its meta records it:
// 0 for an envelope loaded before buckets, and for one Redis does not hold
// (not remembered: it may be loaded next).
func (s *Store) buckets(ctx context.Context, id int64) (int, error) {
	if n, ok := s.bucketCache.get(id); ok {
		return n, nil
	}
	vals, err := s.rdb.HMGet(ctx, s.keys.Meta(id), fieldStatus, fieldBuckets).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("claim buckets of envelope %d: %w", id, err)
	}
	if len(vals) != 2 || vals[0] == nil {
		return 0, nil
	}
	n := 0
	if v, ok := vals[1].(string); ok {
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			return 0, fmt.Errorf("claim buckets of envelope %d: %w: %q", id, ErrBadState, v)
		}
	}
	s.bucketCache.put(id, n)
	return n, nil
}
