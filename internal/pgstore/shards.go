package pgstore

import (
	"context"
	"fmt"
	"time"

	"redpacket/internal/db/dbsqlc"
)

// The flusher's work lists, limited to the shards it holds: with several
// flushers, each settles and repairs only the envelopes of its own shards.

// DueForSettlementIn lists envelopes of the shards to settle at now: sold
// out, or open or expired past their expiry, soonest first.
func (s *Store) DueForSettlementIn(ctx context.Context, shards []int, now time.Time, limit int) ([]Envelope, error) {
	out, err := s.q.DueForSettlement(ctx, dbsqlc.DueForSettlementParams{
		Shards: int32s(shards), Now: now, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("list envelopes due for settlement: %w", err)
	}
	return out, nil
}

// LoadingEnvelopesIn lists envelopes of the shards still loading that were
// created before the given time.
func (s *Store) LoadingEnvelopesIn(ctx context.Context, shards []int, createdBefore time.Time, limit int) ([]Envelope, error) {
	out, err := s.q.LoadingEnvelopes(ctx, dbsqlc.LoadingEnvelopesParams{
		Shards: int32s(shards), CreatedBefore: createdBefore, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("list loading envelopes: %w", err)
	}
	return out, nil
}

func int32s(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}
