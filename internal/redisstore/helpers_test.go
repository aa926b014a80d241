package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// testShards is the shard count of the stores under test: small, so that
// envelope ids of one test land on several shards.
const testShards = 4

// newStore returns a Store on the test Redis under a prefix of the test's
// own, numbering its grants from reservations kept in memory (10 digits,
// 1,000 a reservation, days in UTC).
func newStore(t testing.TB) (*redisstore.Store, redis.UniversalClient) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	return numbered(redisstore.New(rdb, prefix, testShards)), rdb
}

// numbered makes s number its grants as newStore's do.
func numbered(s *redisstore.Store) *redisstore.Store {
	redisstore.NumberInMemory(s, 10, 1000, time.UTC)
	return s
}

// makePackets returns n packets with ids first, first+1, ... and amounts of
// 1..7 cents, and their total.
func makePackets(first int64, n int) ([]redisstore.Packet, int64) {
	ps := make([]redisstore.Packet, n)
	var total int64
	for i := range ps {
		ps[i] = redisstore.Packet{ID: first + int64(i), AmountCents: int64(1 + i%7)}
		total += ps[i].AmountCents
	}
	return ps, total
}

// load loads an envelope of n packets that expires an hour after now and
// returns its packets by id and its total.
func load(t testing.TB, s *redisstore.Store, id int64, n int, now time.Time) (map[int64]int64, int64) {
	t.Helper()
	ps, total := makePackets(id*1_000_000, n)
	loaded, err := s.LoadEnvelope(t.Context(), id, now.Add(time.Hour), total, ps)
	if err != nil || !loaded {
		t.Fatalf("LoadEnvelope(%d) = %v, %v; want true, nil", id, loaded, err)
	}
	byID := make(map[int64]int64, n)
	for _, p := range ps {
		byID[p.ID] = p.AmountCents
	}
	return byID, total
}

func llen(t testing.TB, rdb redis.UniversalClient, key string) int64 {
	t.Helper()
	n, err := rdb.LLen(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("LLEN %s: %v", key, err)
	}
	return n
}

func lrange(t testing.TB, rdb redis.UniversalClient, key string) []string {
	t.Helper()
	v, err := rdb.LRange(context.Background(), key, 0, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE %s: %v", key, err)
	}
	return v
}

func exists(t testing.TB, rdb redis.UniversalClient, key string) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("EXISTS %s: %v", key, err)
	}
	return n == 1
}

// ms is t at the millisecond precision Redis keeps, in UTC.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }
