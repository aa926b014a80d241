package pgstore

import (
	"context"
	"time"
)

// The flusher's work lists, limited to the shards it holds: with several
// flushers, each settles and repairs only the envelopes of its own shards.

// DueForSettlementIn lists envelopes of the shards to settle at now: sold
// out, or open or expired past their expiry, soonest first.
func (s *Store) DueForSettlementIn(ctx context.Context, shards []int, now time.Time, limit int) ([]Envelope, error) {
	return s.envelopes(ctx, `SELECT `+envelopeColumns+` FROM envelopes
		WHERE status IN ('open', 'expired', 'sold_out') AND (expires_at <= $1 OR status = 'sold_out')
		  AND shard = ANY($3)
		ORDER BY expires_at LIMIT $2`, now, limit, shards)
}

// LoadingEnvelopesIn lists envelopes of the shards still loading that were
// created before the given time.
func (s *Store) LoadingEnvelopesIn(ctx context.Context, shards []int, createdBefore time.Time, limit int) ([]Envelope, error) {
	return s.envelopes(ctx, `SELECT `+envelopeColumns+` FROM envelopes
		WHERE status = 'loading' AND created_at < $1 AND shard = ANY($3) ORDER BY id LIMIT $2`,
		createdBefore, limit, shards)
}
