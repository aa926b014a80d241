package flush

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"redpacket/internal/redisstore"
)

// repairBatch bounds how many loading envelopes one repair round handles.
const repairBatch = 100

// RepairLoading finishes envelopes left loading for longer than RepairAfter:
// a grabber died (or lost Redis) between committing an envelope and marking
// it open. Loading is idempotent, so racing a slow grabber is harmless.
func (f *Flusher) RepairLoading(ctx context.Context) error {
	stuck, err := f.pg.LoadingEnvelopes(ctx, f.now().Add(-f.cfg.RepairAfter), repairBatch)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range stuck {
		ids, amounts, err := f.pg.UnclaimedPackets(ctx, e.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		packets := make([]redisstore.Packet, len(ids))
		for i := range ids {
			packets[i] = redisstore.Packet{ID: ids[i], AmountCents: amounts[i]}
		}
		loaded, err := f.redis.LoadEnvelope(ctx, e.ID, e.ExpiresAt, e.TotalCents, packets)
		if errors.Is(err, redisstore.ErrInconsistent) {
			f.log.Error("loading envelope has partial redis state; left loading for an operator",
				zap.Int64("envelope_id", e.ID), zap.Error(err))
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		status, err := f.pg.MarkLoaded(ctx, e.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.log.Warn("repaired envelope left loading", zap.Int64("envelope_id", e.ID),
			zap.Bool("pool_loaded_now", loaded), zap.String("status", status))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("repair loading envelopes: %w", err)
	}
	return nil
}
