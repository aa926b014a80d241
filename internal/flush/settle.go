package flush

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/envelope"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
)

// defaultSettleBatch bounds how many envelopes one settlement round
// handles: a round holds up the claim writes of the flusher's one loop
// while it runs. When more are due, Run starts the next round right after
// the next pass of claims (settleMore) instead of SETTLE_EVERY later.
const defaultSettleBatch = 200

// Settle settles the envelopes that are due: sold out, or past expiry.
func (f *Flusher) Settle(ctx context.Context) error {
	return f.settleIn(ctx, f.shards)
}

// settleIn is Settle for the envelopes of shards.
func (f *Flusher) settleIn(ctx context.Context, shards []int) error {
	if len(shards) == 0 {
		return nil
	}
	due, err := f.pg.DueForSettlementIn(ctx, shards, f.now(), f.settleBatch)
	if err != nil {
		return err
	}
	var errs []error
	progressBefore := f.settled + f.suspended.Load()
	for _, e := range due {
		if ctx.Err() != nil {
			break
		}
		if err := f.settle(ctx, e); err != nil {
			errs = append(errs, err)
		}
	}
	// Another round at once only while rounds get somewhere (envelopes
	// settled, or suspended: either leaves the due ones): a full round
	// of envelopes still waiting for their claims, or one that failed (a
	// failing envelope is in every round, oldest first), waits SETTLE_EVERY
	// as any round does, so the claims' loop keeps its pace and backoff.
	f.settleMore = len(due) == f.settleBatch && len(errs) == 0 && f.settled+f.suspended.Load() > progressBefore
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("settle envelopes: %w", err)
	}
	return nil
}

// settle closes the envelope in Redis so no grab is granted afterwards, makes
// sure every grab Redis granted is in PostgreSQL, then refunds the rest in
// one transaction. Each step can be repeated, so a settlement stopped
// half-way is completed by the next round. If the grabs Redis granted and
// the claims PostgreSQL holds cannot be made to agree, the envelope is
// suspended instead: refunding then could refund a packet someone was told
// they got.
func (f *Flusher) settle(ctx context.Context, e pgstore.Envelope) error {
	closed, err := f.redis.Close(ctx, e.ID, e.Count, max(f.cfg.KeyTTL, settlingKeyTTL))
	if err != nil {
		return err
	}
	if err := f.afterCloseHook(e.ID); err != nil {
		return err
	}
	if e.Status == envelope.StatusSoldOut {
		// Every packet is claimed in PostgreSQL, so Redis has nothing to add
		// and, closed, nothing left to offer.
		return f.finish(ctx, e)
	}
	if !closed.Found {
		return f.suspend(ctx, e.ID, "redis holds no state for the envelope")
	}
	if closed.Before != redisstore.MetaOpen && closed.Before != redisstore.MetaClosed {
		return f.suspend(ctx, e.ID, "redis shows the envelope "+string(closed.Before))
	}
	// Read after the close: every grant is in the queue or PostgreSQL by now.
	cur, err := f.pg.Envelope(ctx, e.ID)
	if err != nil {
		return err
	}
	switch {
	case closed.GrabbedCents < cur.ClaimedCents:
		return f.suspend(ctx, e.ID, fmt.Sprintf(
			"redis granted %d cents but postgres holds %d: redis lost grabs", closed.GrabbedCents, cur.ClaimedCents))
	case closed.GrabbedCents > cur.ClaimedCents:
		return f.awaitClaims(ctx, cur, closed.GrabbedCents)
	}
	return f.finish(ctx, cur)
}

// awaitClaims handles a closed envelope some of whose grants are not in
// PostgreSQL yet. While the shard's queue holds claims they are on their way
// (the queue is first in, first out, and drained before the next round);
// once it is empty, the missing ones never will be.
func (f *Flusher) awaitClaims(ctx context.Context, e pgstore.Envelope, grabbed int64) error {
	pending, err := f.redis.ShardPending(ctx, e.Shard)
	if err != nil {
		return err
	}
	if pending > 0 {
		return f.pg.MarkExpired(ctx, e.ID)
	}
	// Read again now the queue is seen empty: a batch written and
	// acknowledged in between (by another flusher handing the shard over)
	// is counted.
	cur, err := f.pg.Envelope(ctx, e.ID)
	if err != nil {
		return err
	}
	if cur.ClaimedCents == grabbed {
		return f.finish(ctx, cur)
	}
	return f.suspend(ctx, e.ID, fmt.Sprintf(
		"redis granted %d cents but only %d reached postgres", grabbed, cur.ClaimedCents))
}

// finish writes the settlement. An envelope settled meanwhile is fine; one
// whose cents disagree with its packets is suspended for an operator.
func (f *Flusher) finish(ctx context.Context, e pgstore.Envelope) error {
	st, err := f.pg.Settle(ctx, e.ID, f.now(), envelope.StatusOpen, envelope.StatusExpired,
		envelope.StatusSoldOut)
	switch {
	case errors.Is(err, pgstore.ErrWrongStatus):
		return nil
	case errors.Is(err, pgstore.ErrLedger):
		return f.suspend(ctx, e.ID, err.Error())
	case err != nil:
		return err
	}
	f.settled++
	f.log.Info("envelope settled", zap.Int64("envelope_id", e.ID), zap.Int64("claimed_cents", st.ClaimedCents),
		zap.Int64("refunded_cents", st.RefundedCents), zap.Int("packets_refunded", st.Refunded))
	f.warnBestCorrected(e.ID, st)
	if f.cfg.KeyTTL < settlingKeyTTL {
		// Settled: the keys may go SETTLED_KEY_TTL from now (closing a
		// closed envelope only renews their lifetime).
		// Not cut by a stop: no later round comes back to a settled envelope.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := f.redis.Close(ctx, e.ID, e.Count, f.cfg.KeyTTL); err != nil {
			f.log.Warn("settled envelope's redis keys keep their lifetime while settling", zap.Int64("envelope_id", e.ID),
				zap.Duration("lifetime", settlingKeyTTL), zap.Error(err))
		}
	}
	return nil
}

// settlingKeyTTL is the least lifetime the close gives an envelope's Redis
// keys while it is being settled: settling reads them again each round
// until its claims are all in PostgreSQL, and keys gone meanwhile would
// suspend it as a Redis loss. Once settled they get SETTLED_KEY_TTL, which
// may be shorter.
const settlingKeyTTL = 24 * time.Hour

// warnBestCorrected tells that a settlement found the envelope row's
// luckiest grab behind its packets' and wrote theirs: a flusher from before
// the row kept it ran during an upgrade, or something else wrote the
// claims. The money is not affected.
func (f *Flusher) warnBestCorrected(id int64, st pgstore.Settlement) {
	if st.BestCorrected {
		f.log.Warn("envelope's luckiest grab did not match its packets; the settlement wrote theirs",
			zap.Int64("envelope_id", id))
	}
}

func (f *Flusher) afterCloseHook(id int64) error {
	if f.afterClose == nil {
		return nil
	}
	return f.afterClose(id)
}
