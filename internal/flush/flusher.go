// Package flush is the flusher daemon's work: drain granted claims from the
// Redis shards into PostgreSQL in batches, and repair envelopes a crashed
// grabber left loading. It is single-threaded by design: one batch at a time,
// so a batch is always either in flight (in Redis) or durable (in PostgreSQL).
// A batch is written as Pipeline transactions that commit in order, up to
// Writers of them open at once on connections of their own (the COPYs of
// the later ones run while the earliest commits): until the last commits,
// the whole batch stays in flight, and a retry re-applies the transactions
// already committed, which changes nothing.
package flush

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/graceful"
	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/telemetry"
)

// Config tunes the flusher; zero fields take the defaults.
type Config struct {
	BatchSize int // claims per transaction (default 2000)
	// Pipeline is how many transactions of BatchSize one batch taken from
	// a shard holds (default 8; 1 writes one transaction a batch).
	Pipeline int
	// Writers is how many of a batch's transactions are open at once, each
	// on a connection of its own: one commits while the others COPY
	// (default 2; 1 writes them one after the other).
	Writers     int
	IdleWait    time.Duration // pause when every queue is empty (default 100ms)
	MaxBackoff  time.Duration // longest pause after a failure (default 5s)
	RepairEvery time.Duration // how often to look for envelopes left loading (default 5s)
	RepairAfter time.Duration // age at which a loading envelope is repaired (default 30s)
	// FailAfter is the age at which an envelope still loading is given up
	// (failed, all refunded) instead of loaded: its creator was told it
	// failed long ago (default 10m).
	FailAfter   time.Duration
	SettleEvery time.Duration // how often to check epochs and settle due envelopes (default 1s)
	KeyTTL      time.Duration // lifetime of a settled envelope's Redis keys (default 24h)
	// Leases share the shards among several flushers; nil drains every
	// shard (one flusher).
	Leases     *Leases
	LeaseEvery time.Duration // how often leases are renewed and rebalanced (default 1s)
	// StopGrace is how long the batch in hand may go on once Run is told
	// to stop (0: until batchTimeout); one that takes longer is rolled back
	// and written whole by the next flusher. The daemon gives it part of
	// SHUTDOWN_TIMEOUT, so that its shutdown keeps to it.
	StopGrace time.Duration
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 2000
	}
	if c.Pipeline <= 0 {
		c.Pipeline = 8
	}
	if c.Writers <= 0 {
		c.Writers = 2
	}
	def(&c.IdleWait, 100*time.Millisecond)
	def(&c.MaxBackoff, 5*time.Second)
	def(&c.RepairEvery, 5*time.Second)
	def(&c.RepairAfter, 30*time.Second)
	def(&c.FailAfter, 10*time.Minute)
	def(&c.SettleEvery, time.Second)
	def(&c.KeyTTL, 24*time.Hour)
	def(&c.LeaseEvery, time.Second)
	return c
}

// Flusher moves claims from Redis to PostgreSQL.
type Flusher struct {
	redis *redisstore.Store
	pg    *pgstore.Store
	cfg   Config
	log   *zap.Logger
	now   func() time.Time

	suspended atomic.Int64 // envelopes this flusher suspended

	// shards are the shards this flusher drains, settles and repairs: all
	// of them, or those its leases hold. Only Run's goroutine changes it.
	shards []int
	// dataChecked is, per shard, the Redis identity (Store.Identity) under
	// which its envelopes were last checked against PostgreSQL
	// (checkNewData). Only Run's goroutine uses it.
	dataChecked map[int]string
	// settleBatch bounds a settlement round (defaultSettleBatch; tests
	// lower it); settleMore is set by a round that filled it, settled some
	// and failed none, so that the next round follows the next pass at
	// once rather than SettleEvery later. Only Run's goroutine uses them.
	settleBatch int
	settleMore  bool
	settled     int64 // envelopes settled, for settleMore

	// Test hooks, called between the steps of a batch; an error stops the
	// batch there as a crash would.
	afterTake   func(shard int) error
	afterCommit func(shard int) error
	afterClose  func(envelopeID int64) error
}

// New returns a Flusher.
func New(rs *redisstore.Store, pg *pgstore.Store, cfg Config, log *zap.Logger) *Flusher {
	if log == nil {
		log = zap.NewNop()
	}
	f := &Flusher{redis: rs, pg: pg, cfg: cfg.withDefaults(), log: log, now: time.Now, dataChecked: map[int]string{},
		settleBatch: defaultSettleBatch}
	if f.cfg.Leases == nil {
		for shard := range rs.Keys().Shards() {
			f.shards = append(f.shards, shard)
		}
	}
	return f
}

// renewLeases takes or gives up shards; without leases it does nothing. On
// an error the flusher holds no shard until the next renewal succeeds.
func (f *Flusher) renewLeases(ctx context.Context) error {
	if f.cfg.Leases == nil {
		return nil
	}
	shards, err := f.cfg.Leases.Refresh(ctx) // logs a change in one line
	f.shards = shards
	return err
}

// batchTimeout bounds one batch's writes. They run on a context detached from
// shutdown so a batch in hand is finished rather than abandoned half-way
// (within StopGrace).
const batchTimeout = 30 * time.Second

// batchContext is a batch's context (graceful.Detached): a batch in hand
// when the flusher is told to stop is finished, but ended batchTimeout
// after it starts or grace after the stop, whichever comes first. A batch
// ended early is rolled back, or committed in part, and the next flusher
// writes it whole again: writing it twice changes nothing.
func batchContext(parent context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	return graceful.Detached(parent, batchTimeout, grace)
}

// Run drains until ctx is cancelled, then returns nil. In-flight claims an
// earlier flusher left behind are re-flushed first, since each shard's batch
// starts with what is in flight.
func (f *Flusher) Run(ctx context.Context) error {
	f.log.Info("flusher running", zap.Int("shards", f.redis.Keys().Shards()),
		zap.Int("batch_size", f.cfg.BatchSize), zap.Int("pipeline", f.cfg.Pipeline), zap.Int("writers", f.cfg.Writers), zap.Duration("idle_wait", f.cfg.IdleWait),
		zap.Duration("settle_every", f.cfg.SettleEvery), zap.Duration("key_ttl", f.cfg.KeyTTL))
	startShardSeries(f.redis.Keys().Shards())
	if f.cfg.Leases != nil {
		defer f.cfg.Leases.Close()
	}
	var c clocks
	retries := shardRetries{}
	for ctx.Err() == nil {
		// Each part retries on a clock of its own: a shard that fails waits
		// out its backoff (shardRetries), and so do the leases and upkeep
		// (clocks), so that none failing holds up the others.
		leaseWait, leaseErr := f.renewLeasesIfDue(ctx, &c)
		busy, passWait, passErr := f.pass(ctx, retries)
		more, upkeepWait, upkeepErr := f.upkeepIfDue(ctx, &c)
		if err := errors.Join(leaseErr, passErr, upkeepErr); err != nil && ctx.Err() == nil {
			telemetry.FlushErrors.Inc()
			f.log.Error("flush failed; will retry", zap.Duration("backoff", max(leaseWait, passWait, upkeepWait)),
				zap.Error(err))
		}
		if !busy && !more {
			sleep(ctx, f.cfg.IdleWait)
		}
	}
	f.log.Info("flusher stopped")
	return nil
}

// clocks are when Run next renews the leases, runs upkeep and repairs, and
// the backoffs of the leases and upkeep after failures in a row (0 after a
// success).
type clocks struct {
	lease, upkeep, repair       time.Time
	leaseBackoff, upkeepBackoff time.Duration
}

// schedule sets a periodic task's next run from now: every period while it
// succeeds; after failures in a row, not before its backoff, which doubles
// from backoffStart up to maxBackoff. retryIn is the wait after a failure,
// 0 after a success.
func schedule(next *time.Time, backoff *time.Duration, now time.Time, period, maxBackoff time.Duration,
	err error) (retryIn time.Duration) {
	if err == nil {
		*backoff, *next = 0, now.Add(period)
		return 0
	}
	*backoff = grow(*backoff, maxBackoff)
	retryIn = max(period, *backoff)
	*next = now.Add(retryIn)
	return retryIn
}

// renewLeasesIfDue renews the leases once LeaseEvery has passed (never
// without leases); retryIn is the wait after a failure.
func (f *Flusher) renewLeasesIfDue(ctx context.Context, c *clocks) (retryIn time.Duration, err error) {
	now := f.now()
	if f.cfg.Leases == nil || now.Before(c.lease) {
		return 0, nil
	}
	err = f.renewLeases(ctx)
	return schedule(&c.lease, &c.leaseBackoff, now, f.cfg.LeaseEvery, f.cfg.MaxBackoff, err), err
}

// upkeepIfDue runs Upkeep on its own clock (SettleEvery, repairing every
// RepairEvery): a failing shard must not hold up settlement or repair of
// the others, nor an upkeep that fails the claims. more says that more
// settlements are due than a round takes: the next round follows the next
// pass at once, which keeps the claims flowing meanwhile. retryIn is the
// wait after a failure.
func (f *Flusher) upkeepIfDue(ctx context.Context, c *clocks) (more bool, retryIn time.Duration, err error) {
	now := f.now()
	if now.Before(c.upkeep) {
		return false, 0, nil
	}
	repair := !now.Before(c.repair)
	err = f.Upkeep(ctx, repair)
	retryIn = schedule(&c.upkeep, &c.upkeepBackoff, now, f.cfg.SettleEvery, f.cfg.MaxBackoff, err)
	if f.settleMore {
		c.upkeep, more = now, true
	}
	if repair {
		c.repair = now.Add(f.cfg.RepairEvery)
	}
	return more, retryIn, err
}

// Upkeep checks every shard's epoch, then settles the envelopes that are due
// and, when repair is set, finishes envelopes left loading. Both need the
// epochs: a shard whose epoch cannot be checked is left for a later round.
func (f *Flusher) Upkeep(ctx context.Context, repair bool) error {
	f.settleMore = false
	// The waiting claims are counted first, whatever else fails: they pile
	// up most when PostgreSQL is down, and the stall alert reads them.
	pendingErr := f.gaugePending(ctx)
	epochs, err := f.Reconcile(ctx)
	if epochs == nil {
		return errors.Join(pendingErr, err)
	}
	// Only the shards whose epochs were checked are settled and repaired:
	// one that cannot be (its Cluster master unreachable) waits for a
	// later round without holding up the others.
	err = errors.Join(pendingErr, err, f.settleIn(ctx, checked(f.shards, epochs)))
	if repair {
		err = errors.Join(err, f.RepairLoading(ctx, epochs))
	}
	return err
}

// checked is the shards among shards whose epochs Reconcile checked.
func checked(shards []int, epochs []string) []int {
	out := make([]int, 0, len(shards))
	for _, s := range shards {
		if epochs[s] != "" {
			out = append(out, s)
		}
	}
	return out
}

// gaugePending publishes how many claims wait in each shard.
func (f *Flusher) gaugePending(ctx context.Context) error {
	pending, err := f.redis.Pending(ctx)
	if err != nil {
		return err
	}
	for shard, n := range pending {
		telemetry.PendingClaims.WithLabelValues(strconv.Itoa(shard)).Set(float64(n))
	}
	return nil
}

// startShardSeries creates each shard's batch counter at 0 when the flusher
// starts, as the README promises of labelled counters: one that first
// appears at 1, after a restart, hides that batch from increase() and
// rate(). Every shard, not only those this flusher's leases hold: a shard
// may move to it at any time.
func startShardSeries(shards int) {
	for shard := range shards {
		telemetry.FlushBatches.WithLabelValues(strconv.Itoa(shard))
	}
}

// takeSize is how many claims a batch takes from a shard at most.
func (f *Flusher) takeSize() int { return f.cfg.BatchSize * f.cfg.Pipeline }

// Suspended counts the envelopes this flusher has suspended.
func (f *Flusher) Suspended() int64 { return f.suspended.Load() }

const backoffStart = 50 * time.Millisecond

// Pass flushes one batch from every shard. busy reports that some shard had
// a full batch, so more is probably waiting and the caller should not sleep.
func (f *Flusher) Pass(ctx context.Context) (busy bool, err error) {
	busy, _, err = f.pass(ctx, nil)
	return busy, err
}

// pass is Pass for Run: with retries, a shard whose batch fails is put off
// (shardRetries) and skipped until it is due, and backoff is the longest it
// put a shard off for. One failing shard must not hold up the others.
func (f *Flusher) pass(ctx context.Context, retries shardRetries) (busy bool, backoff time.Duration, err error) {
	var errs []error
	start := f.now()
	for _, shard := range f.shards {
		if ctx.Err() != nil {
			break
		}
		if retries != nil && !retries.due(shard, start) {
			continue
		}
		n, err := f.FlushShard(ctx, shard)
		if err != nil {
			errs = append(errs, err)
			if retries != nil {
				backoff = max(backoff, retries.failed(shard, start, f.cfg.MaxBackoff))
			}
			continue
		}
		delete(retries, shard)
		busy = busy || n >= f.takeSize()
	}
	return busy, backoff, errors.Join(errs...)
}

// Drain flushes until every queue is empty (or ctx ends); tests and
// shutdown-time callers use it.
func (f *Flusher) Drain(ctx context.Context) error {
	for {
		pending, err := f.redis.Pending(ctx)
		if err != nil {
			return err
		}
		total := int64(0)
		for _, n := range pending {
			total += n
		}
		if total == 0 {
			return nil
		}
		if _, err := f.Pass(ctx); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
