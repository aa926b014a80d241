// Package stack assembles the grabber's service over a test's own
// PostgreSQL database and Redis prefix, with a clock the test controls.
package stack

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap/zaptest"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/ids"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/sequence"
	"redpacket/internal/testenv"
)

// Shards is the shard count of a test stack (the migrated default).
const Shards = 16

// Stack is one test's service and its stores.
type Stack struct {
	Pool   *pgxpool.Pool
	DBURL  string
	RDB    redis.UniversalClient
	Prefix string
	PG     *pgstore.Store
	Redis  *redisstore.Store
	Svc    *grab.Service
	Clock  *testenv.Clock
	// Config is what Svc was built with: a test builds a service of other
	// settings over the same stores from it.
	Config grab.Config
}

// New builds a stack on the test Redis; everything is closed and dropped
// when the test ends.
func New(t testing.TB) *Stack {
	t.Helper()
	return build(t, testenv.Redis)
}

// NewCluster builds the same stack on the test Redis Cluster
// (testenv.RedisCluster), so the service's keys spread over its masters.
func NewCluster(t testing.TB) *Stack {
	t.Helper()
	return build(t, testenv.RedisCluster)
}

func build(t testing.TB, redisFor func(testing.TB) (redis.UniversalClient, string)) *Stack {
	t.Helper()
	pool, dbURL := testenv.Postgres(t)
	rdb, prefix := redisFor(t)
	s := &Stack{
		Pool: pool, DBURL: dbURL, RDB: rdb, Prefix: prefix,
		PG:    pgstore.New(pool),
		Redis: redisstore.New(rdb, prefix, Shards),
		Clock: testenv.NewClock(time.Now()),
	}
	envIDs := sequence.New(pool, "envelope", sequence.Options{MaxAge: grab.EnvelopeIDMaxAge})
	packetIDs := sequence.New(pool, "packet", sequence.Options{})
	t.Cleanup(envIDs.Close)
	t.Cleanup(packetIDs.Close)
	// The store numbers its grants with it, so it must outlive every grab.
	orderNos := ids.NewOrderNumbers(s.Redis, s.PG, ids.OrderConfig{Log: zaptest.NewLogger(t)})
	t.Cleanup(orderNos.Close)
	s.Config = grab.Config{
		PG: s.PG, Redis: s.Redis, EnvIDs: envIDs, PacketIDs: packetIDs,
		Shares:   ids.NewShareCodes(rdb, s.Redis.Keys(), ids.ShareConfig{Now: s.Clock.Now}),
		ShortIDs: ids.NewShortIDs(rdb, s.Redis.Keys(), pool, ids.ShortIDConfig{}),
		Limits:   envelope.DefaultLimits(), Now: s.Clock.Now, Log: zaptest.NewLogger(t),
	}
	s.Svc = grab.New(s.Config)
	return s
}
