package events

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// PruneStore deletes old events (pgstore.Store).
type PruneStore interface {
	PruneEvents(ctx context.Context, cutoff time.Time, deliveredOnly bool, after int64, limit int) (
		deleted int, last int64, done bool, err error)
	PruneClaimEvents(ctx context.Context, cutoff time.Time, deliveredOnly bool, after int64, limit int) (
		deleted int, last int64, done bool, err error)
}

// pruneFunc deletes one batch of one kind of events (PruneStore's methods).
type pruneFunc func(ctx context.Context, cutoff time.Time, deliveredOnly bool, after int64, limit int) (
	deleted int, last int64, done bool, err error)

// Retention deletes events older than Age, in batches. With a webhook
// configured it deletes only delivered ones: an event the receiver has not
// accepted stays until it has.
type Retention struct {
	Store         PruneStore
	Age           time.Duration
	DeliveredOnly bool
	Every         time.Duration // how often to prune (default 1m)
	Batch         int           // events looked at per statement (default 1000)
	Log           *zap.Logger
	Now           func() time.Time // default time.Now
}

// Run prunes at start and then every Every until ctx ends, then returns
// nil (a failed prune is retried at the next tick).
func (r *Retention) Run(ctx context.Context) error {
	every := r.Every
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := r.Prune(ctx); err != nil && ctx.Err() == nil {
			r.log().Warn("events retention failed; will retry", zap.Error(err))
		} else if n > 0 {
			r.log().Info("old events pruned", zap.Int("deleted", n), zap.Duration("age", r.Age))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Prune deletes what is due now, one batch per statement (each its own
// short transaction), and returns how many events it deleted.
func (r *Retention) Prune(ctx context.Context) (int, error) {
	now, batch := time.Now, r.Batch
	if r.Now != nil {
		now = r.Now
	}
	if batch <= 0 {
		batch = 1000
	}
	cutoff := now().Add(-r.Age)
	var total int
	// Events rows, then the claim events of runs: each kind walks its own
	// positions.
	for _, prune := range []pruneFunc{r.Store.PruneEvents, r.Store.PruneClaimEvents} {
		n, err := r.pruneAll(ctx, prune, cutoff, batch)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// pruneAll runs prune batch after batch until it is done.
func (r *Retention) pruneAll(ctx context.Context, prune pruneFunc, cutoff time.Time, batch int) (int, error) {
	var total int
	var after int64
	for ctx.Err() == nil {
		n, last, done, err := prune(ctx, cutoff, r.DeliveredOnly, after, batch)
		total += n
		pruned.Add(float64(n))
		if err != nil || done {
			return total, err
		}
		after = last
	}
	return total, ctx.Err()
}

func (r *Retention) log() *zap.Logger {
	if r.Log == nil {
		return zap.NewNop()
	}
	return r.Log
}
