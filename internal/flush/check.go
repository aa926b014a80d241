package flush

import (
	"context"
	"errors"
	"slices"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
)

// checkBatch looks, after a batch is committed, for signs that Redis lost
// part of the state of the batch's envelopes, and suspends those before they
// can re-offer a packet again:
//   - a conflict that means a packet was granted twice or a user twice (a
//     reused order number is harmless: the claim counts without it);
//   - no meta in Redis for an envelope PostgreSQL still has open;
//   - Redis granting fewer cents than PostgreSQL already holds (Redis came
//     back from an older copy of its data, such as an AOF missing its last
//     second).
//
// It costs one Redis pipeline and one query per batch.
func (f *Flusher) checkBatch(ctx context.Context, claims []pgstore.Claim, res pgstore.ApplyResult) error {
	var errs []error
	// Contradicted, not only the new conflicts: a batch retried after a crash
	// (or a failed suspension) must suspend again.
	for _, c := range res.Contradicted {
		if c.Reason != pgstore.ConflictOrderNo {
			errs = append(errs, f.suspend(ctx, c.EnvelopeID, "claim conflict: "+c.Reason))
		}
	}
	ids := make([]int64, 0, 8)
	for _, c := range claims {
		ids = append(ids, c.EnvelopeID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	inPG, err := f.pg.ClaimedCents(ctx, ids)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	inRedis, err := f.redis.Metas(ctx, ids)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, id := range ids {
		e, ok := inPG[id]
		if !ok || !redisHeld(e.Status) {
			continue
		}
		reason := lossReason(pgstore.Envelope{ID: id, Status: e.Status, ClaimedCents: e.ClaimedCents}, inRedis)
		if reason != "" {
			errs = append(errs, f.suspend(ctx, id, reason))
		}
	}
	return errors.Join(errs...)
}

// redisHeld tells whether an envelope in this status should have its state
// in Redis: settled and failed ones may have let their keys expire, suspended
// ones are already in an operator's hands, and sold-out ones have nothing
// left to offer.
func redisHeld(status envelope.Status) bool {
	switch status {
	case envelope.StatusLoading, envelope.StatusOpen, envelope.StatusExpired:
		return true
	}
	return false
}
