package pgstore_test

import (
	"strconv"
	"testing"

	"redpacket/internal/pgstore"
)

// BenchmarkApplyClaims measures one batch of 2000 new claims per operation,
// inserting a fresh envelope whenever the current one runs out of packets.
func BenchmarkApplyClaims(b *testing.B) {
	s, _ := newStore(b)
	ctx := ctxT(b)
	const (
		batchSize   = 2000
		perEnvelope = 50 * batchSize
	)
	amounts := make([]int64, perEnvelope)
	for i := range amounts {
		amounts[i] = int64(1 + i%97)
	}
	var (
		env  int64
		next = perEnvelope // packets of env used so far
	)
	batch := make([]pgstore.Claim, batchSize)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if next == perEnvelope {
			b.StopTimer()
			env++
			insert(b, s, env, env*10_000_000, amounts, t0)
			if _, err := s.MarkLoaded(ctx, env); err != nil {
				b.Fatal(err)
			}
			next = 0
			b.StartTimer()
		}
		for i := range batch {
			p := env*10_000_000 + int64(next+i)
			batch[i] = claim(env, p, "u"+strconv.FormatInt(p, 10))
		}
		next += batchSize
		res, err := s.ApplyClaims(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		if res.Applied != batchSize || len(res.Conflicts) != 0 {
			b.Fatalf("applied %d, %d conflicts; want %d, 0", res.Applied, len(res.Conflicts), batchSize)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/claim")
}
