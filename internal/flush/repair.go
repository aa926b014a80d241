package flush

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
)

// repairBatch bounds how many loading envelopes one repair round handles.
const repairBatch = 100

// RepairLoading finishes envelopes left loading for longer than RepairAfter:
// a grabber died (or lost Redis) between committing an envelope and marking
// it open. One not yet expired and younger than FailAfter is loaded (loading
// is idempotent, so racing a slow grabber is harmless); any other is failed,
// all its packets refunded, unless Redis shows it was loaded after all.
// epochs are the shard tokens Reconcile just checked: Redis acts only while
// a shard still holds its token, so a shard that lost its data in between
// is never taken for one whose envelope was simply never loaded.
func (f *Flusher) RepairLoading(ctx context.Context, epochs []string) error {
	now := f.now()
	if len(f.shards) == 0 {
		return nil
	}
	stuck, err := f.pg.LoadingEnvelopesIn(ctx, f.shards, now.Add(-f.cfg.RepairAfter), repairBatch)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range stuck {
		epoch := epochs[e.Shard]
		if epoch == "" {
			// The shard's epoch could not be checked this round (and an
			// empty one would mean "load regardless").
			continue
		}
		if now.After(e.ExpiresAt) || now.Sub(e.CreatedAt) > f.cfg.FailAfter {
			err = f.failLoading(ctx, epoch, e)
		} else if err = f.load(ctx, epoch, e); errors.Is(err, redisstore.ErrGivenUp) || errors.Is(err, redisstore.ErrOtherEnvelope) {
			// Redis was given the envelope up (failed or suspended) by a
			// step PostgreSQL did not follow, cut short: finished now. Or
			// another envelope holds its id there: it cannot be offered.
			err = f.failLoading(ctx, epoch, e)
		}
		switch {
		case errors.Is(err, redisstore.ErrInconsistent):
			err = f.suspend(ctx, e.ID, "redis holds part of the envelope's state without its meta")
		case errors.Is(err, redisstore.ErrSuspended):
			err = f.suspend(ctx, e.ID, "redis holds the envelope suspended but postgres did not record it (a suspension cut short); see the logs before it")
		}
		if err != nil && !errors.Is(err, redisstore.ErrEpochChanged) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("repair loading envelopes: %w", err)
	}
	return nil
}

func (f *Flusher) load(ctx context.Context, epoch string, e pgstore.Envelope) error {
	ids, amounts, err := f.pg.UnclaimedPackets(ctx, e.ID)
	if err != nil {
		return err
	}
	packets := make([]redisstore.Packet, len(ids))
	for i := range ids {
		packets[i] = redisstore.Packet{ID: ids[i], AmountCents: amounts[i]}
	}
	g, err := f.gates(ctx, e)
	if err != nil {
		return err
	}
	loaded, err := f.redis.LoadGated(ctx, epoch, e.ID, e.ExpiresAt, e.TotalCents, packets, g)
	if err != nil {
		return err
	}
	return f.markLoaded(ctx, e.ID, loaded)
}

func (f *Flusher) markLoaded(ctx context.Context, id int64, loadedNow bool) error {
	status, err := f.pg.MarkLoaded(ctx, id)
	if err != nil {
		return err
	}
	f.log.Warn("repaired envelope left loading", zap.Int64("envelope_id", id),
		zap.Bool("pool_loaded_now", loadedNow), zap.Stringer("status", status))
	return nil
}

// failLoading gives an envelope up: a failed meta in Redis first, so a late
// load by its creator changes nothing, then every packet refunded.
func (f *Flusher) failLoading(ctx context.Context, epoch string, e pgstore.Envelope) error {
	wasLoaded, err := f.redis.Fail(ctx, epoch, e.ID, e.Count, e.ExpiresAt, e.TotalCents, f.cfg.KeyTTL)
	foreign := errors.Is(err, redisstore.ErrOtherEnvelope)
	if err != nil && !foreign {
		return err
	}
	if wasLoaded {
		// It may have been offered: it is an ordinary envelope now, and
		// settlement takes it from here.
		return f.markLoaded(ctx, e.ID, false)
	}
	st, err := f.pg.FailLoading(ctx, e.ID, f.now())
	if errors.Is(err, pgstore.ErrWrongStatus) {
		return nil
	}
	if err != nil {
		return err
	}
	if foreign {
		// Redis's state under the id stays: it is another envelope's.
		f.log.Error("gave up an envelope whose id another envelope holds in redis; nothing of it was offered, all "+
			"refunded. Ids were handed out again: was PostgreSQL restored from a backup older than Redis?",
			zap.Int64("envelope_id", e.ID), zap.Int64("refunded_cents", st.RefundedCents))
		return nil
	}
	f.log.Warn("gave up an envelope that never finished loading; nothing was offered, all refunded",
		zap.Int64("envelope_id", e.ID), zap.Int64("refunded_cents", st.RefundedCents))
	return nil
}
