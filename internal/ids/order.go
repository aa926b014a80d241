package ids

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/redisstore"
)

const (
	defaultOrderWidth = 10
	maxOrderWidth     = 18 // 10^18 is the largest power of ten an int64 holds
	defaultOrderStep  = 100_000
)

// Reserver records order-number ranges durably; *pgstore.Store is one. It
// adds step to the shard's reserved_upto of the day (date as yyyyMMdd) and
// returns it before and after, in one statement, so concurrent reservations
// get disjoint ranges.
type Reserver interface {
	ReserveOrderNos(ctx context.Context, date string, shard int, step int64) (old, new int64, err error)
}

// OrderConfig tunes OrderNumbers; the zero value is usable.
type OrderConfig struct {
	// Width is the number of digits after the date, 1..18; 0 means 10.
	Width int
	// Step is how many counter values of a shard one reservation takes; 0
	// (or less) means 100,000. It is capped at what the width holds for a
	// shard.
	Step int64
	// Location is where days begin and end; nil means UTC.
	Location *time.Location
	// Log receives the failures of background raises; nil logs nothing.
	Log *zap.Logger
}

// OrderNumbers keeps the order-number ceilings of a Store's shards: it is
// the store's OrderNumbering. Numbers are handed out by the grab script
// (see redisstore/orders.go); this side reserves ranges in PostgreSQL and
// records them in Redis: ahead of need, in the background, when a shard has
// less than half a step left (so grabs do not wait on PostgreSQL), and on
// demand when a grab finds none. One raise per shard and day runs at a time
// in a process; grabs that need one wait for the one under way. It is safe
// for concurrent use; release it with Close.
type OrderNumbers struct {
	store *redisstore.Store
	pg    Reserver
	width int
	step  int64
	loc   *time.Location
	log   *zap.Logger

	day      atomic.Pointer[orderDay] // the last day Date was asked about
	aheadFor atomic.Pointer[string]   // the latest day whose ranges were reserved ahead

	ctx     context.Context // of background raises; cancelled by Close
	cancel  context.CancelFunc
	mu      sync.Mutex
	flights map[flightKey]*flight
	closed  bool
	// unrecorded is each shard's day's range PostgreSQL reserved whose
	// recording in Redis failed: the next raise records it rather than
	// reserving another (see raise).
	unrecorded map[flightKey]reserved

	failed   int       // raises failed since the last warning
	warnedAt time.Time // of the last warning
	wg       sync.WaitGroup
}

// orderDay is a day and its date, so Date needs no formatting within it.
type orderDay struct {
	start, end time.Time
	date       string
	ahead      time.Time // from here on the next day's ranges are reserved
	next       string    // the next day's date
}

// aheadOfMidnight is how long before a day ends the next day's ranges are
// reserved, one per shard, in the background: the day's first grabs then
// need no PostgreSQL, so a PostgreSQL down at midnight does not stop grabs
// that the day before's ranges would have served. A reservation that fails
// is tried again every aheadRetry, until it succeeds or the hour is over.
const (
	aheadOfMidnight = time.Hour
	aheadRetry      = 30 * time.Second
)

type flightKey struct {
	shard int
	date  string
}

// flight is one raise under way; done is closed when err is set.
type flight struct {
	done    chan struct{}
	err     error
	waiters int // callers that joined it after it started (tests watch it)
}

// NewOrderNumbers returns the ceilings keeper of store's order numbers,
// reserving in pg, and makes store number its grants with it. It panics if
// cfg.Width is outside 0..18, a programming error (the settings are checked
// at start).
func NewOrderNumbers(store *redisstore.Store, pg Reserver, cfg OrderConfig) *OrderNumbers {
	width := orDefault(cfg.Width, defaultOrderWidth)
	if width < 1 || width > maxOrderWidth {
		panic(fmt.Sprintf("ids: order number width %d outside 1..%d", cfg.Width, maxOrderWidth))
	}
	step := cfg.Step
	if step <= 0 {
		step = defaultOrderStep
	}
	o := &OrderNumbers{store: store, pg: pg, width: width, loc: orDefault(cfg.Location, time.UTC),
		log: cfg.Log, flights: map[flightKey]*flight{}}
	if o.log == nil {
		o.log = zap.NewNop()
	}
	store.NumberOrders(o)
	// Shard 0 holds the most numbers; a step beyond them would only skip
	// numbers when a fence throws a range away.
	o.step = max(1, min(step, store.MaxOrderCounter(0)))
	o.ctx, o.cancel = context.WithCancel(context.Background())
	return o
}

// Width is the number of digits after the date.
func (o *OrderNumbers) Width() int { return o.width }

// Date is t's day as yyyyMMdd in the configured time zone.
func (o *OrderNumbers) Date(t time.Time) string {
	d := o.day.Load()
	if d == nil || t.Before(d.start) || !t.Before(d.end) {
		lt := t.In(o.loc)
		y, m, dd := lt.Date()
		d = &orderDay{start: DayStart(y, m, dd, o.loc), end: DayStart(y, m, dd+1, o.loc), date: lt.Format("20060102")}
		d.ahead, d.next = d.end.Add(-aheadOfMidnight), d.end.In(o.loc).Format("20060102")
		o.day.Store(d)
	}
	if !t.Before(d.ahead) {
		// Once per next day: grabs around midnight come a little out of
		// order, and the day they flip back to must not start it again.
		if p := o.aheadFor.Load(); (p == nil || *p < d.next) && o.aheadFor.CompareAndSwap(p, &d.next) {
			o.raiseNextDay(d.next)
		}
	}
	return d.date
}

// raiseNextDay reserves, in the background, a range of every shard for the
// day next (see aheadOfMidnight).
func (o *OrderNumbers) raiseNextDay(next string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		left := make([]int, o.store.Keys().Shards())
		for i := range left {
			left[i] = i
		}
		for try := 0; len(left) > 0 && try < int(aheadOfMidnight/aheadRetry); try++ {
			if try > 0 {
				select {
				case <-o.ctx.Done():
					return
				case <-time.After(aheadRetry):
				}
			}
			left = slices.DeleteFunc(left, func(shard int) bool { return o.supplyNow(flightKey{shard, next}) == nil })
		}
	}()
}

// supplyNow raises k's numbers in this goroutine, or waits for the raise
// under way.
func (o *OrderNumbers) supplyNow(k flightKey) error {
	f, started := o.join(k)
	if f == nil {
		return ErrClosed
	}
	if started {
		o.fly(k, f, "")
	}
	<-f.done
	return f.err
}

// Remaining starts a raise in the background when a shard has less than
// half a step of numbers left for the day and none is under way.
func (o *OrderNumbers) Remaining(shard int, date string, left int64) {
	if left >= (o.step+1)/2 {
		return
	}
	f, started := o.join(flightKey{shard, date})
	if f == nil || !started {
		return
	}
	go o.fly(flightKey{shard, date}, f, "")
}

// Supply waits until the shard has numbers for the day again: it joins the
// raise under way or starts one, and returns its outcome. A raise fences the
// counter when the ceiling was set by another Redis than the one serving
// the shard now (short.Identity, as the grab saw it).
func (o *OrderNumbers) Supply(ctx context.Context, short *redisstore.OrderShortage) error {
	k := flightKey{short.Shard, short.Date}
	f, started := o.join(k)
	if f == nil {
		return fmt.Errorf("order numbers: %w", ErrClosed)
	}
	if started {
		go o.fly(k, f, short.Identity)
	}
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return fmt.Errorf("order numbers of shard %d on %s: %w", k.shard, k.date, context.Cause(ctx))
	}
}

// Close stops new raises and waits for those under way (cancelled). Supply
// then fails with ErrClosed. Close may be called more than once.
func (o *OrderNumbers) Close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.cancel()
	o.wg.Wait()
}

// join returns the flight of k, started reporting whether the caller must
// fly it; nil after Close.
func (o *OrderNumbers) join(k flightKey) (f *flight, started bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, false
	}
	if f := o.flights[k]; f != nil {
		f.waiters++
		return f, false
	}
	f = &flight{done: make(chan struct{})}
	o.flights[k] = f
	o.wg.Add(1)
	return f, true
}

// raiseTimeout bounds one raise, PostgreSQL and Redis together.
const raiseTimeout = 10 * time.Second

// fly runs a raise for everyone waiting on f, on the generator's own
// context: a waiter that gives up does not cancel it for the others.
func (o *OrderNumbers) fly(k flightKey, f *flight, fenceFor string) {
	defer o.wg.Done()
	ctx, cancel := context.WithTimeout(o.ctx, raiseTimeout)
	f.err = o.raise(ctx, k, fenceFor)
	cancel()
	o.mu.Lock()
	delete(o.flights, k)
	warn := 0
	if f.err != nil {
		o.failed++
		if now := time.Now(); now.Sub(o.warnedAt) >= raiseWarnEvery {
			warn, o.failed, o.warnedAt = o.failed, 0, now
		}
	}
	o.mu.Unlock()
	if warn > 0 {
		o.log.Warn("order numbers not raised", zap.Int("shard", k.shard), zap.String("date", k.date),
			zap.Int("count", warn), zap.Error(f.err))
	}
	close(f.done)
}

// raiseWarnEvery spaces the warnings of raises that failed: while
// PostgreSQL is down each grab that finds no number may start a raise, and
// a line each would flood the log. A line counts the failures since the
// last one and names the latest.
const raiseWarnEvery = 10 * time.Second

// fenceTries bounds the reservations of one raise: one per Redis identity
// it is told to fence for (a second only if Redis changed again meanwhile),
// after a plain one when it was not told to fence to begin with.
const fenceTries = 3

// raise reserves the next range in PostgreSQL and records it in Redis.
//
// A fence needs a range reserved after the Redis it fences was seen to
// differ: every number answered before, by any Redis, is then below the
// range, since the ceiling it was answered under was reserved earlier. So
// fenceFor is an identity a grab saw before this raise began ("" for a
// plain raise), and when Redis answers a raise with an identity, the range
// is reserved again before fencing for it. A range refused is never used:
// a raise retried by the client on a newly promoted replica is refused too,
// as the fence names the Redis it is for.
//
// A plain raise's range whose recording failed otherwise (a timeout, a
// Redis that went away) is kept and recorded by the next plain raise of its
// shard's day: each grab that found no number would otherwise reserve a
// range, and a Redis failing for a while used up the shard's day. Recording
// a plain range twice changes nothing (under the same identity the counter
// and the ceiling only grow; under another, it is refused with FENCE and
// dropped). A fence's range is never kept: recorded late, after its call
// ran with its answer lost and the hash was lost again, it would move the
// counter back below numbers already answered.
func (o *OrderNumbers) raise(ctx context.Context, k flightKey, fenceFor string) error {
	for range fenceTries {
		r, ok := o.takeUnrecorded(k, fenceFor)
		if !ok {
			old, upto, err := o.pg.ReserveOrderNos(ctx, k.date, k.shard, o.step)
			if err != nil {
				return fmt.Errorf("reserve order numbers of shard %d on %s: %w", k.shard, k.date, err)
			}
			r = reserved{old: old, upto: upto}
		}
		_, err := o.store.RaiseOrderCeiling(ctx, k.shard, k.date, r.old, r.upto, fenceFor)
		var short *redisstore.OrderShortage
		if !errors.As(err, &short) {
			if err != nil && fenceFor == "" {
				o.keepUnrecorded(k, r)
			}
			return err
		}
		fenceFor = short.Identity
		o.log.Info("fencing order numbers: redis changed since their ceiling was set",
			zap.Int("shard", k.shard), zap.String("date", k.date), zap.String("redis", fenceFor))
	}
	return fmt.Errorf("order numbers of shard %d on %s: redis changed during each of %d fences", k.shard, k.date, fenceTries)
}

// reserved is a range of a shard's day PostgreSQL reserved for a plain
// raise, (old, upto].
type reserved struct{ old, upto int64 }

// takeUnrecorded takes the range of k whose recording failed, for a plain
// raise.
func (o *OrderNumbers) takeUnrecorded(k flightKey, fenceFor string) (reserved, bool) {
	if fenceFor != "" {
		return reserved{}, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	r, ok := o.unrecorded[k]
	delete(o.unrecorded, k)
	return r, ok
}

// keepUnrecorded keeps a plain range of k whose recording failed for the
// next plain raise, and drops those of days before the one grabs are
// numbered in now (dates in yyyyMMdd sort as days do), which no raise asks
// for again.
func (o *OrderNumbers) keepUnrecorded(k flightKey, r reserved) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.unrecorded == nil {
		o.unrecorded = map[flightKey]reserved{}
	}
	if d := o.day.Load(); d != nil {
		for old := range o.unrecorded {
			if old.date < d.date {
				delete(o.unrecorded, old)
			}
		}
	}
	o.unrecorded[k] = r
}
