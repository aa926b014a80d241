// Package daemon holds what both daemons do the same way with their
// servers: connecting to PostgreSQL and Redis (with the schema check and the
// shard count every process must share), readiness, closing, and serving an
// HTTP server until its context ends. Settings are in internal/config, the
// logger, metrics and probes in internal/telemetry; each cmd/*/main.go waits
// for the signal and wires the rest.
package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"redpacket/internal/config"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/telemetry"
)

// Clients are the connections a daemon works with.
type Clients struct {
	PG     *pgxpool.Pool
	Redis  redis.UniversalClient
	Shards int
}

// Connect opens PostgreSQL and Redis, checks the schema version and reads the
// shard count every process must share.
func Connect(ctx context.Context, c config.Config) (*Clients, error) {
	pool, err := pgstore.Connect(ctx, c.DatabaseURL)
	if err != nil {
		return nil, err
	}
	cl := &Clients{PG: pool}
	if err := pgstore.CheckSchema(ctx, pool); err != nil {
		cl.Close()
		return nil, err
	}
	if cl.Shards, err = pgstore.Shards(ctx, pool); err != nil {
		cl.Close()
		return nil, err
	}
	if cl.Redis, err = redisstore.Connect(ctx, c.RedisURL, c.RedisClusterAddrs, c.RedisPoolSize); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// startTimeout bounds connecting and checking the servers at start.
const startTimeout = 30 * time.Second

// Open is how a daemon starts: Connect, then refuse an evicting Redis
// (CheckRedis) before anything is served or flushed, within startTimeout.
func Open(ctx context.Context, c config.Config, log *zap.Logger) (*Clients, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	cl, err := Connect(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := CheckRedis(ctx, cl.Redis, log, c.GrabWaitReplicas); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// Ready checks that both servers answer.
func (c *Clients) Ready(ctx context.Context) error {
	if err := c.PG.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := c.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// Checks are each server's ping, by name, for the readiness metric
// (telemetry.NewDependencyCollector).
func (c *Clients) Checks() map[string]telemetry.Check {
	return map[string]telemetry.Check{
		"postgres": c.PG.Ping,
		"redis":    func(ctx context.Context) error { return c.Redis.Ping(ctx).Err() },
	}
}

// Close closes whatever is open.
func (c *Clients) Close() {
	if c.Redis != nil {
		_ = c.Redis.Close()
	}
	if c.PG != nil {
		c.PG.Close()
	}
}
