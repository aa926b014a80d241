package pgstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"redpacket/internal/pgstore"
)

// BenchmarkApplyClaims measures one batch of 2000 new claims per operation
// with the shipped ApplyClaims, inserting a fresh envelope whenever the
// current one runs out of packets.
func BenchmarkApplyClaims(b *testing.B) {
	s, _ := newStore(b)
	benchApply(b, s, func(ctx context.Context, batch []pgstore.Claim) (int, error) {
		res, err := s.ApplyClaims(ctx, batch)
		if len(res.Conflicts) != 0 {
			return 0, fmt.Errorf("%d conflicts", len(res.Conflicts))
		}
		return res.Applied, err
	})
}

func benchApply(b *testing.B, s *pgstore.Store, write func(context.Context, []pgstore.Claim) (int, error)) {
	ctx := b.Context()
	const (
		batchSize   = 2000
		perEnvelope = 50 * batchSize
	)
	amounts := amountsOf(perEnvelope)
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
			batch[i] = benchClaim(env, p, "u"+strconv.FormatInt(p, 10))
		}
		next += batchSize
		applied, err := write(ctx, batch)
		if err != nil {
			b.Fatal(err)
		}
		if applied != batchSize {
			b.Fatalf("applied %d; want %d", applied, batchSize)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/claim")
}
