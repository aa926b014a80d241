package redisstore

import (
	"context"
	"fmt"
)

// Holds reports whether Redis holds the envelope (its meta) and whether the
// user holds a packet of it there, without taking anything: a grab refused
// by a user's limits still answers a holder's repeat.
func (s *Store) Holds(ctx context.Context, envelopeID int64, userID string) (loaded, held bool, err error) {
	buckets, err := s.buckets(ctx, envelopeID)
	if err != nil {
		return false, false, err
	}
	pipe := s.rdb.Pipeline()
	meta := pipe.Exists(ctx, s.keys.Meta(envelopeID))
	claim := pipe.HExists(ctx, s.keys.UserClaims(envelopeID, buckets, userID), userID)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, false, fmt.Errorf("read claim of envelope %d: %w", envelopeID, err)
	}
	return meta.Val() == 1, claim.Val(), nil
}
