package ids

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// shanghai is UTC+8 without tzdata, so the tests run on any machine: local
// midnight is 16:00 UTC, a day boundary that UTC dates do not share.
var shanghai = time.FixedZone("CST", 8*3600)

// twoClients returns the keys of a prefix of the test's own and two Redis
// clients on them, as two processes of the service would have.
func twoClients(t testing.TB) (redisstore.Keys, redis.UniversalClient, redis.UniversalClient) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	return redisstore.NewKeys(prefix, 4), rdb, newClient(t)
}

func newClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatalf("parse redis url: %v", err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// midday is noon UTC today: grabs then are not in a day's last hour, when
// the next day's ranges are reserved ahead, for the tests that count
// reservations.
func midday() time.Time { return time.Now().UTC().Truncate(24 * time.Hour).Add(12 * time.Hour) }

// lastInstant is 23:59:59.999 of the day, in loc.
func lastInstant(y int, m time.Month, d int, loc *time.Location) time.Time {
	return time.Date(y, m, d, 23, 59, 59, 999_000_000, loc)
}

// set records strings and reports the first repeat.
type set struct {
	mu   sync.Mutex
	seen map[string]bool
}

func newSet() *set { return &set{seen: make(map[string]bool)} }

// add reports false if s was added before.
func (st *set) add(s string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.seen[s] {
		return false
	}
	st.seen[s] = true
	return true
}

func (st *set) len() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.seen)
}

// checkDayTTL asserts the key expires within two days and not much sooner.
func checkDayTTL(t testing.TB, rdb redis.UniversalClient, key string) {
	t.Helper()
	ttl, err := rdb.TTL(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("TTL %s: %v", key, err)
	}
	if ttl <= 47*time.Hour || ttl > 48*time.Hour {
		t.Fatalf("TTL of %s = %v, want about 48h", key, ttl)
	}
}
