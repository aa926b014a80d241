package retention

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// Loop is retention run by the flusher daemon (LEDGER_ARCHIVE_DIR): a run
// at start and then every Every, until ctx ends. A run stopped by the end of
// ctx rolls its batch in hand back and takes it out of the files.
type Loop struct {
	Pool    *pgxpool.Pool
	Options Options       // Now is left nil: each run's present is its start
	Every   time.Duration // default DefaultEvery
	Log     *zap.Logger
}

// DefaultEvery is how often the daemon runs retention.
const DefaultEvery = time.Hour

// Run runs until ctx ends, then returns nil; a failed run is logged and
// tried again at the next tick.
func (l *Loop) Run(ctx context.Context) error {
	every := l.Every
	if every <= 0 {
		every = DefaultEvery
	}
	log := l.Log
	if log == nil {
		log = zap.NewNop()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		res, err := Run(ctx, l.Pool, l.Options)
		fields := []zap.Field{zap.Int64("envelopes", res.Removed.Envelopes), zap.Int64("packets", res.Removed.Packets),
			zap.Int64("total_cents", res.Removed.TotalCents), zap.Int64("claimed_cents", res.Removed.ClaimedCents),
			zap.Int64("refunded_cents", res.Removed.RefundedCents), zap.String("archive", res.Set),
			zap.Duration("older_than", l.Options.OlderThan)}
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("ledger retention failed; will retry", append(fields, zap.Error(err))...)
		case res.Removed.Envelopes > 0:
			log.Info("settled envelopes archived and deleted", fields...)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
