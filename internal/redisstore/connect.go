package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Connect returns a client on one Redis (url), or on a Redis Cluster when
// clusterAddrs is not empty, and checks that it answers.
func Connect(ctx context.Context, url string, clusterAddrs []string, poolSize int) (redis.UniversalClient, error) {
	var c redis.UniversalClient
	if len(clusterAddrs) > 0 {
		c = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: clusterAddrs, PoolSize: poolSize,
			// A dead master answers no MOVED, so only this reload finds its
			// promoted replica: every second, not the default minute.
			ClusterStateReloadInterval: time.Second,
		})
	} else {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("parse REDIS_URL: %w", err)
		}
		opts.PoolSize = poolSize
		c = redis.NewClient(opts)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("ping redis: %w", err)
	}
	return c, nil
}
