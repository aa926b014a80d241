// Package daemon holds what both daemons do the same way with their
// servers: connecting to PostgreSQL and Redis (with the schema check and the
// shard count every process must share), readiness, closing, and serving an
// HTTP server until its context ends. Settings are in internal/config, the
// logger, metrics and probes in internal/telemetry; each cmd/*/main.go waits
// for the signal and wires the rest.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// Connect opens PostgreSQL and Redis, checks the schema version, reads the
// shard count every process must share, and checks that this process
// shares the ledger's other settings and that its Redis holds no other
// ledger's state (bind; an operator command's check, which records
// nothing). lockTimeout > 0 bounds each PostgreSQL statement's waits on
// locks (pgstore.PoolConfig).
func Connect(ctx context.Context, c config.Config, lockTimeout time.Duration) (*Clients, error) {
	cl, err := connect(ctx, c, lockTimeout)
	if err != nil {
		return nil, err
	}
	if err := bind(ctx, cl, c, config.Flusher, false); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// connect opens both servers, checks the schema and reads the shard count.
func connect(ctx context.Context, c config.Config, lockTimeout time.Duration) (*Clients, error) {
	pool, err := pgstore.Connect(ctx, c.DatabaseURL, lockTimeout)
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

// Open is how daemon d starts, within startTimeout: connect, refuse an
// evicting Redis (CheckRedis), then bind, recording the shared settings it
// uses and the ledger's name in Redis where none are yet, before anything
// is served or flushed. A daemon refused records nothing.
func Open(ctx context.Context, d config.Daemon, c config.Config, log *zap.Logger, lockTimeout time.Duration) (*Clients, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	cl, err := connect(ctx, c, lockTimeout)
	if err != nil {
		return nil, err
	}
	if err := CheckRedis(ctx, cl.Redis, log, c.GrabWaitReplicas); err != nil {
		cl.Close()
		return nil, err
	}
	if err := bind(ctx, cl, c, d, true); err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// Ready checks that both servers answer, and a Redis Cluster serves every
// slot (pingRedis).
func (c *Clients) Ready(ctx context.Context) error {
	if err := c.PG.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := c.checkRedis(ctx); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// checkRedis is pingRedis answered by the end of ctx at the latest: the
// Redis client ends a command at its own timeouts (3 s to read, and
// retries), not at its context's deadline, while the readiness metric
// promises an answer within a scrape's 2 s. A ping cut off goes on in the
// background until the client's timeout or Close ends it.
func (c *Clients) checkRedis(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- pingRedis(ctx, c.Redis) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("no answer in time: %w", context.Cause(ctx))
	}
}

// Checks are each server's ping, by name, for the readiness metric
// (telemetry.NewDependencyCollector).
func (c *Clients) Checks() map[string]telemetry.Check {
	return map[string]telemetry.Check{
		"postgres": c.PG.Ping,
		"redis":    c.checkRedis,
	}
}

// pingRedis checks that Redis answers. A single server is PINGed. On a
// cluster a PING proves little: a node answers it while its cluster is
// down (cluster_state:fail) and refuses every grab with CLUSTERDOWN, so
// every master must answer CLUSTER INFO with cluster_state:ok.
func pingRedis(ctx context.Context, c redis.UniversalClient) error {
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return c.Ping(ctx).Err()
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		addr := m.Options().Addr
		info, err := m.ClusterInfo(ctx).Result()
		if refusedCommand(err) {
			// A managed cluster that denies or renames CLUSTER INFO: the
			// master answered, which is all that can be told of it.
			return nil
		}
		if err != nil {
			return fmt.Errorf("master %s: cluster info: %w", addr, err)
		}
		if state := clusterState(info); state != "ok" {
			return fmt.Errorf("master %s: cluster_state is %q, not ok: the cluster refuses requests", addr, state)
		}
		return nil
	})
}

// clusterState is the cluster_state field of a CLUSTER INFO reply (ok,
// fail), "" when the reply has none.
func clusterState(info string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, found := strings.CutPrefix(strings.TrimSpace(line), "cluster_state:"); found {
			return v
		}
	}
	return ""
}

// refusedCommand says whether err is Redis refusing the command itself (an
// ACL denying it, or the command renamed away) rather than failing to run it.
func refusedCommand(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	msg := reply.Error()
	return strings.HasPrefix(msg, "NOPERM") || strings.HasPrefix(msg, "ERR unknown command")
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
