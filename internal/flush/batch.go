package flush

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
)

// FlushShard writes one batch of a shard's claims and returns its size.
//
// Take moves the batch into the shard's in-flight list, ApplyClaims commits
// it idempotently, Ack deletes the in-flight list. Killed after Take, the
// next flusher takes the same batch again; killed after the commit, it
// applies the batch again, which changes nothing. So every claim is written
// exactly once.
func (f *Flusher) FlushShard(ctx context.Context, shard int) (int, error) {
	raw, err := f.redis.Take(ctx, shard, f.cfg.BatchSize)
	if err != nil || len(raw) == 0 {
		return 0, err
	}
	if err := hook(f.afterTake, shard); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	claims, malformed := parseBatch(raw)
	res, err := f.pg.ApplyClaims(ctx, claims)
	if err != nil {
		return 0, fmt.Errorf("shard %d: %w", shard, err)
	}
	if len(malformed) > 0 {
		// Only this service writes the queue, so this is corruption: keep
		// the entries where an operator can find them before the ack drops
		// them. After the commit, so a retried batch copies them once.
		if err := f.redis.Reject(ctx, shard, malformed); err != nil {
			return 0, err
		}
		f.log.Error("malformed claims moved to the shard's rejected list",
			zap.Int("shard", shard), zap.Strings("claims", malformed))
	}
	f.report(shard, len(claims), res)
	if err := f.checkBatch(ctx, claims, res); err != nil {
		return 0, err
	}
	if err := hook(f.afterCommit, shard); err != nil {
		return 0, err
	}
	return len(raw), f.redis.Ack(ctx, shard)
}

func parseBatch(raw []string) (claims []pgstore.Claim, malformed []string) {
	claims = make([]pgstore.Claim, 0, len(raw))
	for _, r := range raw {
		q, err := redisstore.ParseQueued(r)
		if err != nil {
			malformed = append(malformed, r)
			continue
		}
		claims = append(claims, pgstore.Claim{
			EnvelopeID: q.EnvelopeID, PacketID: q.PacketID, UserID: q.UserID, ClaimedAt: q.GrabbedAt,
			OrderNo: q.OrderNo,
		})
	}
	return claims, malformed
}

func (f *Flusher) report(shard, n int, res pgstore.ApplyResult) {
	f.log.Debug("batch flushed", zap.Int("shard", shard), zap.Int("claims", n), zap.Int("applied", res.Applied))
	for _, id := range res.SoldOut {
		f.log.Info("envelope sold out", zap.Int64("envelope_id", id))
	}
	for _, c := range res.Conflicts {
		f.log.Error("claim conflicts with postgres; recorded in claim_conflicts, not applied",
			zap.Int64("envelope_id", c.EnvelopeID), zap.Int64("packet_id", c.PacketID),
			zap.String("user_id", c.UserID), zap.String("reason", c.Reason))
	}
}

func hook(h func(int) error, shard int) error {
	if h == nil {
		return nil
	}
	return h(shard)
}
