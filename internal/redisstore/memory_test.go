package redisstore_test

import (
	"strconv"
	"testing"
	"time"

	"redpacket/internal/redisstore"
)

// BenchmarkMemoryPerPacket reports Redis memory (MEMORY USAGE, every element
// counted) per packet of a 100,000-packet envelope: in the pool before any
// grab, then per grab not yet flushed (its claim in the envelope's claims
// hash plus its entry in the shard's queue), then per claim kept after the
// flush (the claims hash answers repeats until the keys expire).
func BenchmarkMemoryPerPacket(b *testing.B) {
	s, rdb := newStore(b)
	ctx := b.Context()
	k := s.Keys()
	const n = 100_000
	now := time.Now()
	for i := range b.N {
		id := int64(i + 1)
		load(b, s, id, n, now)
		pool := memory(b, rdb.MemoryUsage(ctx, k.Pool(id), 0).Val())
		stop := s.Coalesce(4, 64)
		for u := range n {
			if _, err := s.Grab(ctx, id, "user-"+strconv.Itoa(u), now); err != nil {
				b.Fatal(err)
			}
		}
		stop()
		claims := memory(b, rdb.MemoryUsage(ctx, k.Claims(id), 0).Val())
		queue := memory(b, rdb.MemoryUsage(ctx, k.Consumed(k.Shard(id)), 0).Val())
		b.ReportMetric(pool/n, "B/pooled")
		b.ReportMetric((claims+queue)/n, "B/unflushed")
		b.ReportMetric(claims/n, "B/claim")
		rdb.Del(ctx, k.Meta(id), k.Pool(id), k.Claims(id), k.Consumed(k.Shard(id)))
	}
	b.ReportMetric(0, "ns/op")
	_ = redisstore.MetaOpen
}

func memory(b *testing.B, v int64) float64 {
	if v <= 0 {
		b.Fatalf("MEMORY USAGE = %d", v)
	}
	return float64(v)
}
