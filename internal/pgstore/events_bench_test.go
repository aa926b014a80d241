package pgstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"redpacket/internal/pgstore"
)

// BenchmarkApplyClaimsOutbox measures what writing the events costs a
// flusher's batch. Each operation applies two batches of 2,000 new claims,
// one with the shipped statement (claims and their events) and one with the
// same statement cut before its events, on fresh packets, alternately, so
// that both figures come from the same moments of a shared machine.
func BenchmarkApplyClaimsOutbox(b *testing.B) {
	s, _ := newStore(b)
	ctx := b.Context()
	batches := newBatches(b, s)
	var with, without time.Duration
	for b.Loop() {
		batch := batches.next(ctx)
		start := time.Now()
		res, err := s.ApplyClaims(ctx, batch)
		if err != nil || res.Applied != claimBatch {
			b.Fatalf("ApplyClaims = %+v, %v", res, err)
		}
		with += time.Since(start)
		batch = batches.next(ctx)
		start = time.Now()
		n, err := s.ApplyClaimsWithoutEvents(ctx, batch)
		if err != nil || n != claimBatch {
			b.Fatalf("without events: %d, %v", n, err)
		}
		without += time.Since(start)
	}
	claims := float64(b.N * claimBatch)
	b.ReportMetric(float64(with.Nanoseconds())/claims, "ns/claim-with-events")
	b.ReportMetric(float64(without.Nanoseconds())/claims, "ns/claim-without")
	b.ReportMetric(0, "ns/op")
}

const (
	claimBatch  = 2000
	perEnvelope = 50 * claimBatch
)

// batches hands out batches of new claims, inserting a fresh envelope
// whenever the current one runs out of packets: envelopes env+1, env+2, ...
// (env starts at 0 unless set), their packets claimed by claimOf (claim,
// each packet by a new user, unless set).
type batches struct {
	b       *testing.B
	s       *pgstore.Store
	amounts []int64
	env     int64
	used    int
	claimOf func(env, packet int64) pgstore.Claim
}

func newBatches(b *testing.B, s *pgstore.Store) *batches {
	return &batches{b: b, s: s, amounts: amountsOf(perEnvelope), used: perEnvelope, claimOf: func(env, p int64) pgstore.Claim {
		return benchClaim(env, p, "u"+strconv.FormatInt(p, 10))
	}}
}

func (bs *batches) next(ctx context.Context) []pgstore.Claim {
	if bs.used == perEnvelope {
		bs.b.StopTimer()
		bs.env++
		insert(bs.b, bs.s, bs.env, bs.env*10_000_000, bs.amounts, t0)
		if _, err := bs.s.MarkLoaded(ctx, bs.env); err != nil {
			bs.b.Fatal(err)
		}
		bs.used = 0
		bs.b.StartTimer()
	}
	batch := make([]pgstore.Claim, claimBatch)
	for i := range batch {
		p := bs.env*10_000_000 + int64(bs.used+i)
		batch[i] = bs.claimOf(bs.env, p)
	}
	bs.used += claimBatch
	return batch
}
