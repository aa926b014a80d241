package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv/throwaway"
)

// BenchmarkMemoryPerPacket reports what Redis holds per packet of a
// 100,000-packet envelope, as deltas of INFO memory's used_memory on a Redis
// of its own with the default configuration: per packet in the pool before
// any grab, per grab waiting for the flusher (its claim and its queue entry,
// less the pool entry it freed), and per claim kept once the queue is
// written (the claims answer repeats until the keys expire).
func BenchmarkMemoryPerPacket(b *testing.B) {
	rdb := privateRedis(b)
	s := numbered(redisstore.New(rdb, "mem", 1))
	ctx := b.Context()
	const n = 100_000
	now := time.Now()
	for i := range b.N {
		id := int64(i + 1)
		empty := usedMemory(b, rdb)
		load(b, s, id, n, now)
		pooled := usedMemory(b, rdb)
		stop := s.Coalesce(4, 64)
		for u := range n {
			if _, err := s.Grab(ctx, id, "user-"+strconv.Itoa(u), now); err != nil {
				b.Fatal(err)
			}
		}
		stop()
		waiting := usedMemory(b, rdb)
		if err := rdb.Del(ctx, s.Keys().Consumed(0)).Err(); err != nil {
			b.Fatal(err)
		}
		kept := usedMemory(b, rdb)
		b.ReportMetric(float64(pooled-empty)/n, "B/pooled")
		b.ReportMetric(float64(waiting-empty)/n, "B/waiting")
		b.ReportMetric(float64(kept-empty)/n, "B/claim")
		if err := rdb.FlushAll(ctx).Err(); err != nil { // its own server
			b.Fatal(err)
		}
	}
	b.ReportMetric(0, "ns/op")
}

// privateRedis starts a Redis of the benchmark's own, so that no other
// client's keys move its memory figures.
func privateRedis(b *testing.B) *redis.Client {
	srv, err := throwaway.StartRedis(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop() })
	opt, err := redis.ParseURL(srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	b.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// usedMemory is INFO memory's used_memory.
func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no used_memory in %q", info)
	return 0
}
