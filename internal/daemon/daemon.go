// Package daemon holds what both daemons do the same way at start and stop:
// settings and logger, clients, the operations HTTP server, and serving
// until a signal.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"redpacket/internal/config"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
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

// Close closes whatever is open.
func (c *Clients) Close() {
	if c.Redis != nil {
		_ = c.Redis.Close()
	}
	if c.PG != nil {
		c.PG.Close()
	}
}

// Serve runs srv on addr until ctx ends, then shuts it down, letting requests
// in hand finish for up to grace. It returns when the server has stopped.
func Serve(ctx context.Context, log *zap.Logger, srv *http.Server, addr string, grace time.Duration) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	log.Info("listening", zap.String("addr", ln.Addr().String()))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
