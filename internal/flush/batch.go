package flush

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/telemetry"
)

// FlushShard writes one batch of a shard's claims and returns its size.
//
// TakeBatch moves the batch into the shard's in-flight list,
// ApplyClaimsInChunks commits it idempotently (in transactions of BatchSize
// claims that commit in order), AckBatch deletes the in-flight list. Killed
// after the take, the next flusher takes the same batch again; killed after
// a commit, it applies the batch again, which changes nothing for what was
// committed. So every claim is written exactly once.
func (f *Flusher) FlushShard(ctx context.Context, shard int) (int, error) {
	start := time.Now()
	// Every error names the shard: the stall alert sends operators to the
	// flushers' logs for the shard it names.
	b, err := f.redis.TakeBatch(ctx, shard, f.takeSize())
	if err != nil {
		return 0, fmt.Errorf("shard %d: take: %w", shard, err)
	}
	if b.Len() == 0 {
		return 0, nil
	}
	phase := phaseClock(start)
	phase(telemetry.PhaseTake)
	if err := hook(f.afterTake, shard); err != nil {
		return 0, err
	}
	ctx, cancel := batchContext(ctx, f.cfg.StopGrace)
	defer cancel()
	claims := toClaims(b.Claims)
	res, err := f.pg.ApplyClaimsInChunks(ctx, claims, f.cfg.BatchSize, f.cfg.Writers)
	var refused []int
	if pgstore.IsRefused(err) {
		// PostgreSQL refuses the batch's data, not the connection: retried
		// whole it would fail forever and hold up the shard. Halving it
		// finds the culprits, which are set aside like malformed ones.
		f.log.Error("postgres refused a batch; applying it in halves to find the refused claims",
			zap.Int("shard", shard), zap.Error(err))
		claims, res, refused, err = f.applyAroundRefused(ctx, claims)
		if err == nil {
			err = f.suspendRefused(ctx, b, refused)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("shard %d: %w", shard, err)
	}
	phase(telemetry.PhaseLedger)
	// The lag ends at the commit but is observed after the ack: a batch
	// whose check or ack fails is taken and committed again, and observed
	// then, so observing it here too would count its claims twice.
	committed := time.Now()
	f.report(shard, len(claims), res)
	if err := f.checkBatch(ctx, claims, res); err != nil {
		return 0, fmt.Errorf("shard %d: check: %w", shard, err)
	}
	phase(telemetry.PhaseCheck)
	if err := hook(f.afterCommit, shard); err != nil {
		return 0, err
	}
	// The ack keeps the malformed entries and the refused claims where an
	// operator finds them: only this service writes the queue, so either is
	// corruption.
	acked, rejected, err := f.redis.AckBatch(ctx, b, refused)
	if err != nil {
		return 0, fmt.Errorf("shard %d: ack: %w", shard, err)
	}
	phase(telemetry.PhaseAck)
	if len(rejected) > 0 {
		telemetry.Rejected.Add(float64(len(rejected)))
		f.log.Error("malformed or refused claims moved to the shard's rejected list",
			zap.Int("shard", shard), zap.Strings("claims", rejected))
	}
	if !acked {
		f.log.Warn("in-flight batch was replaced while it was written: another flusher took the shard over",
			zap.Int("shard", shard))
	}
	telemetry.FlushBatches.WithLabelValues(strconv.Itoa(shard)).Inc()
	telemetry.FlushBatchSize.Observe(float64(b.Len()))
	observeLag(claims, committed)
	telemetry.FlushBatchSeconds.Observe(time.Since(start).Seconds())
	return b.Len(), nil
}

// phaseClock returns a function that records, under the phase it is given,
// the time since its previous call (the first: since start).
func phaseClock(start time.Time) func(phase string) {
	last := start
	return func(phase string) {
		now := time.Now()
		telemetry.FlushPhaseSeconds.WithLabelValues(phase).Observe(now.Sub(last).Seconds())
		last = now
	}
}

// observeLag records, per claim, how long after the grab it became durable:
// committed is when the batch's last transaction committed.
func observeLag(claims []pgstore.Claim, committed time.Time) {
	for _, c := range claims {
		telemetry.FlushLagSeconds.Observe(committed.Sub(c.ClaimedAt).Seconds())
	}
}

// suspendRefused suspends the envelopes of claims PostgreSQL refused: a user
// was answered those packets and cannot be paid them, so an operator must
// decide before the envelope is settled.
func (f *Flusher) suspendRefused(ctx context.Context, b redisstore.Batch, refused []int) error {
	var errs []error
	for _, i := range refused {
		errs = append(errs, f.suspend(ctx, b.Claims[i].EnvelopeID, "postgres refused a claim: "+b.Entry(i)))
	}
	return errors.Join(errs...)
}

// applyAroundRefused applies claims, skipping those PostgreSQL refuses
// (returned as their indexes, in order): each half of the claims in a
// transaction of its own, a refused half halved again, down to single
// claims. A refused claim is rare, so a batch of n with one costs about
// 2 log2(n) transactions, not n: one at a time, the default batch of 16,000
// claims could outlast batchTimeout, and every retry would start again from
// the first.
func (f *Flusher) applyAroundRefused(ctx context.Context, claims []pgstore.Claim) (
	kept []pgstore.Claim, res pgstore.ApplyResult, refused []int, err error,
) {
	var apply, halve func(lo, hi int) error
	apply = func(lo, hi int) error {
		r, err := f.pg.ApplyClaims(ctx, claims[lo:hi])
		switch {
		case err == nil:
			kept = append(kept, claims[lo:hi]...)
			// Contradicted too: checkBatch suspends the envelopes of the
			// claims PostgreSQL contradicts, on this path as on the other.
			res.Add(r)
			return nil
		case pgstore.IsRefused(err):
			return halve(lo, hi)
		}
		return err
	}
	// halve applies claims[lo:hi], known to hold a refused claim.
	halve = func(lo, hi int) error {
		if hi-lo == 1 {
			refused = append(refused, lo)
			return nil
		}
		mid := lo + (hi-lo)/2
		if err := apply(lo, mid); err != nil {
			return err
		}
		return apply(mid, hi)
	}
	if len(claims) == 0 {
		return nil, res, nil, nil
	}
	if err := halve(0, len(claims)); err != nil {
		return nil, pgstore.ApplyResult{}, nil, err
	}
	return kept, res, refused, nil
}

// toClaims turns a batch's queued claims into the ledger's claims.
func toClaims(queued []redisstore.QueuedClaim) []pgstore.Claim {
	claims := make([]pgstore.Claim, len(queued))
	for i, q := range queued {
		claims[i] = pgstore.Claim{
			EnvelopeID: q.EnvelopeID, PacketID: q.PacketID, UserID: q.UserID, AmountCents: q.AmountCents,
			ClaimedAt: q.GrabbedAt, OrderNo: q.OrderNo,
		}
	}
	return claims
}

func (f *Flusher) report(shard, n int, res pgstore.ApplyResult) {
	f.log.Debug("batch flushed", zap.Int("shard", shard), zap.Int("claims", n), zap.Int("applied", res.Applied))
	for _, id := range res.SoldOut {
		f.log.Info("envelope sold out", zap.Int64("envelope_id", id))
	}
	for _, c := range res.Conflicts {
		telemetry.Conflicts.WithLabelValues(c.Reason).Inc()
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
