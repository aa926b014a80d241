package ids

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/sequence"
)

const (
	defaultOrderWidth   = 10
	maxOrderWidth       = 18 // 10^18 is the largest power of ten an int64 holds
	defaultOrderSegment = 1000
	orderDateLen        = len("yyyyMMdd")
)

// OrderConfig tunes OrderNumbers; the zero value is usable.
type OrderConfig struct {
	// Width is the number of digits after the date, 1..18; 0 means 10.
	Width int
	// Segment is how many numbers one Redis round trip takes; 0 (or less)
	// means 1000.
	// It is capped at what Width holds, so a narrow width is not used up by
	// one process's cache.
	Segment int64
	// Location is where days begin and end; nil means UTC.
	Location *time.Location
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// PrefetchAt is the fraction of a segment left when the next one is taken
	// in the background; 0 means 0.25 (see sequence.Options).
	PrefetchAt float64
	// Floor returns the highest sequence number of a day (date as yyyyMMdd,
	// numbers of width digits after it) that PostgreSQL holds. It is read when Redis has lost its counters;
	// the day's counter then restarts above it, with room for the numbers
	// answered but not yet written. nil means Redis is the only record
	// (numbers restart at 1 after a loss).
	Floor func(ctx context.Context, date string, width int) (int64, error)
}

// OrderNumbers hands out order numbers "yyyyMMdd" + a zero-padded sequence of
// Width digits, unique across processes sharing the Redis keys.
//
// Each day has its own sequence.Allocator over the day's Redis counter. When
// the clock enters another day, the allocator of the old day is closed, which
// drops its cached numbers (a gap, never a number dated a day that is over),
// and one for the new day takes its place. It is safe for concurrent use;
// release it with Close.
type OrderNumbers struct {
	rdb        redis.UniversalClient
	keys       redisstore.Keys
	width      int
	limit      int64 // 10^width, the first sequence number that does not fit
	segment    int64
	prefetchAt float64
	loc        *time.Location
	now        func() time.Time
	floor      func(ctx context.Context, date string, width int) (int64, error)

	// cur is read without the mutex on every Next; it is nil before the
	// first Next and after Close.
	cur      atomic.Pointer[orderDay]
	mu       sync.Mutex // serialises day changes and Close
	closed   atomic.Bool
	retiring sync.WaitGroup // allocators of past days being closed; Close waits
}

// orderDay is the allocator of one day and what Next needs to date its
// numbers without calling the time package's formatting.
type orderDay struct {
	start, end time.Time // the day is [start, end) in the Location
	date       [orderDateLen]byte
	alloc      *sequence.Allocator
}

// NewOrderNumbers returns an order-number generator. It does not touch Redis
// until the first Next. It panics if cfg.Width is outside 0..18, a
// programming error no later call could recover from.
func NewOrderNumbers(rdb redis.UniversalClient, keys redisstore.Keys, cfg OrderConfig) *OrderNumbers {
	width := orDefault(cfg.Width, defaultOrderWidth)
	if width < 1 || width > maxOrderWidth {
		panic(fmt.Sprintf("ids: order number width %d outside 1..%d", cfg.Width, maxOrderWidth))
	}
	limit := pow10(width)
	segment := cfg.Segment
	if segment <= 0 {
		segment = defaultOrderSegment
	}
	return &OrderNumbers{
		rdb:        rdb,
		keys:       keys,
		width:      width,
		limit:      limit,
		segment:    min(segment, limit-1),
		prefetchAt: cfg.PrefetchAt,
		floor:      cfg.Floor,
		loc:        orDefault(cfg.Location, time.UTC),
		now:        nowOr(cfg.Now),
	}
}

// Next returns a new order number, dated the day it is returned on.
func (o *OrderNumbers) Next(ctx context.Context) (string, error) {
	for {
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("order number: %w", context.Cause(ctx))
		}
		d, err := o.day(o.now())
		if err != nil {
			return "", err
		}
		seq, err := d.alloc.Next(ctx)
		if errors.Is(err, sequence.ErrClosed) && !o.closed.Load() {
			continue // another caller moved on to a new day and closed this one
		}
		if err != nil {
			return "", fmt.Errorf("order number: %w", err)
		}
		// The day may have ended while Next waited for a segment: dropping
		// the number leaves a gap, dating it a past day would break the rule.
		if !d.contains(o.now()) {
			continue
		}
		return d.format(seq, o.width)
	}
}

// Close releases the cached numbers and waits until no goroutine of the
// generator is left. Next then returns ErrClosed. Close may be called more
// than once.
func (o *OrderNumbers) Close() {
	o.mu.Lock()
	o.closed.Store(true)
	d := o.cur.Swap(nil)
	o.mu.Unlock()
	if d != nil {
		d.alloc.Close()
	}
	o.retiring.Wait()
}

// day returns the allocator of now's day, without locking when it is cached.
func (o *OrderNumbers) day(now time.Time) (*orderDay, error) {
	if d := o.cur.Load(); d != nil && d.contains(now) {
		return d, nil
	}
	return o.changeDay(now)
}

// changeDay installs the allocator of now's day and closes the one it
// replaces, outside the lock: Close waits for that allocator's fetch.
func (o *OrderNumbers) changeDay(now time.Time) (*orderDay, error) {
	o.mu.Lock()
	if o.closed.Load() {
		o.mu.Unlock()
		return nil, fmt.Errorf("order number: %w", ErrClosed)
	}
	old := o.cur.Load()
	if old != nil && now.Before(old.start) {
		// This caller read the clock just before another one moved on to the
		// next day; going back would throw away the new day's segment.
		now = o.now()
	}
	if old != nil && old.contains(now) {
		o.mu.Unlock()
		return old, nil
	}
	d := o.newDay(now)
	o.cur.Store(d)
	if old != nil {
		o.retiring.Add(1)
	}
	o.mu.Unlock()
	if old != nil {
		old.alloc.Close()
		o.retiring.Done()
	}
	return d, nil
}

func (o *OrderNumbers) newDay(now time.Time) *orderDay {
	t := now.In(o.loc)
	y, m, dd := t.Date()
	d := &orderDay{
		start: time.Date(y, m, dd, 0, 0, 0, 0, o.loc),
		end:   time.Date(y, m, dd+1, 0, 0, 0, 0, o.loc),
	}
	date := t.Format("20060102")
	copy(d.date[:], date)
	src := &orderDaySource{rdb: o.rdb, key: o.keys.OrderDay(date), guard: o.keys.OrderGuard(),
		date: date, floor: o.floor, width: o.width, segment: o.segment, limit: o.limit}
	d.alloc = sequence.NewFromSource("order "+date, src, sequence.Options{Step: o.segment, PrefetchAt: o.prefetchAt})
	return d
}

func (d *orderDay) contains(t time.Time) bool {
	return !t.Before(d.start) && t.Before(d.end)
}

// format renders date + seq padded to width in a stack buffer, so the string
// is the only allocation.
func (d *orderDay) format(seq int64, width int) (string, error) {
	var digits [20]byte
	ds := strconv.AppendInt(digits[:0], seq, 10)
	if seq < 0 || len(ds) > width {
		// The source never hands these out; a longer string would break
		// every reader of the fixed format.
		return "", fmt.Errorf("order number %d does not fit %d digits: %w", seq, width, ErrExhausted)
	}
	var buf [orderDateLen + maxOrderWidth]byte
	copy(buf[:], d.date[:])
	pad := orderDateLen + width - len(ds)
	for i := orderDateLen; i < pad; i++ {
		buf[i] = '0'
	}
	copy(buf[pad:], ds)
	return string(buf[:orderDateLen+width]), nil
}

func pow10(n int) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}

// orderDaySource reserves ranges of one day's Redis counter.
type orderDaySource struct {
	rdb     redis.UniversalClient
	key     string
	guard   string
	date    string
	floor   func(ctx context.Context, date string, width int) (int64, error)
	width   int
	segment int64 // taken when the allocator asks for its default size
	limit   int64 // the first number that does not fit the width
}

// Reserve takes want numbers with INCRBY and renews the key's expiry in the
// same script, so a counter never outlives its use by more than two days
// however the connection fails. Numbers at or past limit are never returned:
// a range crossing it is cut short, and the counter stays past it, so later
// calls fail rather than repeat. After Redis lost its data (no guard) the
// counter first restarts above what PostgreSQL holds.
func (s *orderDaySource) Reserve(ctx context.Context, want int64, exact bool) (int64, int64, error) {
	if want <= 0 {
		want = s.segment
	}
	last, err := s.reserve(ctx, want, "")
	if err == nil && last < 0 {
		var floor int64
		if floor, err = s.restartAt(ctx); err == nil {
			last, err = s.reserve(ctx, want, strconv.FormatInt(floor, 10))
		}
	}
	if err != nil {
		return 0, 0, err
	}
	first := last - want + 1
	left := s.limit - first
	if left <= 0 || exact && left < want {
		return 0, 0, fmt.Errorf("%w: order sequence at %d, width allows up to %d", ErrExhausted, first, s.limit-1)
	}
	return first, min(want, left), nil
}

func (s *orderDaySource) reserve(ctx context.Context, want int64, floor string) (int64, error) {
	last, err := orderScript.Run(ctx, s.rdb, []string{s.key, s.guard}, want, int64(dayKeyTTL.Seconds()), floor).Int64()
	if err != nil {
		return 0, fmt.Errorf("reserve order numbers %s: %w", s.key, err)
	}
	return last, nil
}

// restartAt is where a counter Redis lost restarts: above the day's highest
// number in PostgreSQL by a gap for numbers answered but not yet written
// (1% of the width's numbers, at most ten million).
func (s *orderDaySource) restartAt(ctx context.Context) (int64, error) {
	if s.floor == nil {
		return 0, nil
	}
	held, err := s.floor(ctx, s.date, s.width)
	if err != nil {
		return 0, fmt.Errorf("highest order number of %s in postgres: %w", s.date, err)
	}
	return held + min(restartGap, s.limit/100), nil
}

// restartGap bounds the numbers a lost counter is assumed to have handed
// out beyond what PostgreSQL holds.
const restartGap = 10_000_000
