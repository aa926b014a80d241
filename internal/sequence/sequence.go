// Package sequence hands out unique int64 ids (envelope ids, packet ids) from
// the PostgreSQL table sequence_numbers without a database round trip per id.
//
// # Segments
//
// An Allocator reserves a segment of numbers from its Source and hands them
// out from memory under a mutex that never covers I/O. The PostgreSQL source
// (New) reserves in one short transaction: it locks the key's row (SELECT ...
// FOR UPDATE), advances current_value by the segment size and commits. The
// numbers (old, new] then belong to this process alone. Other sources (a Redis
// counter, see NewFromSource) plug into the same caching and prefetching.
//
// # Double buffer
//
// When the current segment's remaining ids drop below Options.PrefetchAt of
// its size, one background goroutine reserves the next segment, so that when
// the current one runs out the next is usually already in memory and callers
// never wait on the database. If it is still in flight, callers wait for it;
// if there is none, or it failed, one caller's fetch is shared by all callers
// that need a segment at that moment.
//
// # Crash guarantee
//
// The row is advanced before any of its numbers are handed out, so a process
// that dies loses at most the numbers it held in memory (the current and the
// prefetched segment) and never repeats one: the next reservation by anyone
// starts above everything this process could have returned. Ids are therefore
// unique and increasing per allocator, but not gap-free.
//
// # Age
//
// Across allocators ids are not in the order they were taken: a quiet
// process hands out its segment for as long as it lasts, below the ids busy
// processes took meanwhile. With Options.MaxAge an allocator drops a segment
// older than that and reserves a fresh one, sized to what it used, so ids
// taken more than MaxAge (and the reservation's round trip) apart are in
// order whoever took them.
package sequence

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	// ErrExhausted means the key's max_value is reached; it is wrapped with
	// the key name.
	ErrExhausted = errors.New("sequence exhausted")
	// ErrUnknownKey means sequence_numbers has no row for the key.
	ErrUnknownKey = errors.New("unknown sequence key (no row in sequence_numbers)")
	// ErrClosed is returned by an Allocator after Close.
	ErrClosed = errors.New("sequence allocator closed")
)

const (
	defaultPrefetchAt = 0.25
	// fetchTimeout bounds one segment fetch, so a hung connection cannot
	// leave every caller waiting on a fetch that will never finish.
	fetchTimeout = 15 * time.Second
)

// Options tune an Allocator; the zero value is usable.
type Options struct {
	// Step is the segment size; 0 (or less) means the source's default (for
	// the PostgreSQL source, the row's step column).
	Step int64
	// PrefetchAt is the fraction of a segment left when the next one is
	// fetched in the background; 0 (or less) means 0.25, more than 1 means 1.
	PrefetchAt float64
	// MaxAge, if positive, is how long after its reservation a segment's
	// ids may be handed out; older ones are dropped (and lost, as in a
	// crash) and a fresh segment reserved. Ids of different allocators then
	// follow the order of the calls that took them when the calls are more
	// than MaxAge (and a reservation's round trip) apart: a process taking
	// few ids does not hand out, hours later, ids below those other
	// processes handed out meanwhile. Envelope ids use it, so that ordering
	// by envelope id is ordering by creation.
	MaxAge time.Duration
	// OnFetch, if set, is called after each committed reservation with the
	// number of ids reserved and how long it took. It runs on the fetching
	// goroutine and should return quickly: Close waits for it.
	OnFetch func(key string, n int64, took time.Duration)
}

// Allocator hands out ids of one key. It is safe for concurrent use; create it
// with New and release it with Close.
type Allocator struct {
	src        Source
	key        string // names the allocator in errors and OnFetch
	step       int64
	prefetchAt float64
	maxAge     time.Duration
	now        func() time.Time // the clock of MaxAge; tests set their own
	onFetch    func(key string, n int64, took time.Duration)

	// ctx is owned by the Allocator, not by any caller, so a caller giving up
	// never aborts a fetch that other callers are waiting on; Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // fetch goroutines, waited for by Close

	mu       sync.Mutex
	cur      segment
	ready    segment // the prefetched segment, valid when hasReady
	hasReady bool
	flight   *flight // the segment fetch in progress, at most one
	// prefetchFailed stops further background attempts for the current
	// segment, so a database outage costs one failed fetch per segment and
	// not one per Next call; the caller that runs out retries synchronously.
	prefetchFailed bool
	// want is the size of the next fetch of a MaxAge allocator after a
	// quiet spell (0: a full step). A process that let a segment go stale
	// asks for about what it used, so that quiet processes take their ids
	// nearly one at a time, in turn, rather than the first id of a
	// segment each: envelope ids pick their shard (id modulo the shards),
	// and first ids of equal steps would all pick the same few.
	want   int64
	full   int64 // the size of a full step, as the source last reserved one
	closed bool
}

// segment is a run of reserved ids not yet handed out.
type segment struct {
	next int64     // the next id to hand out
	left int64     // ids left from next on; counted rather than stored as an end so max int64 cannot overflow
	size int64     // ids the segment started with, the base of the prefetch threshold
	at   time.Time // when its reservation returned, for MaxAge
}

func (s *segment) take(n int64) int64 {
	id := s.next
	s.next += n
	s.left -= n
	return id
}

// flight is one segment fetch. err is written before done is closed.
type flight struct {
	done       chan struct{}
	err        error
	background bool
	size       int64 // ids to ask for; 0: the source's step
}

// New returns an Allocator for key of the table sequence_numbers. It does not
// touch the database: an unknown key is reported by the first Next or Block.
func New(pool *pgxpool.Pool, key string, opt Options) *Allocator {
	return NewFromSource(key, &pgSource{pool: pool, key: key}, opt)
}

// NewFromSource returns an Allocator handing out the ranges src reserves;
// name identifies it in errors and OnFetch. It does not call src: the first
// Next or Block does.
func NewFromSource(name string, src Source, opt Options) *Allocator {
	ctx, cancel := context.WithCancel(context.Background())
	a := &Allocator{
		src:        src,
		key:        name,
		step:       max(opt.Step, 0),
		prefetchAt: opt.PrefetchAt,
		maxAge:     opt.MaxAge,
		now:        time.Now,
		onFetch:    opt.OnFetch,
		ctx:        ctx,
		cancel:     cancel,
	}
	if a.prefetchAt <= 0 {
		a.prefetchAt = defaultPrefetchAt
	}
	a.prefetchAt = min(a.prefetchAt, 1)
	return a
}

// Next returns one id. Ids returned to a single caller in sequence are
// strictly increasing.
func (a *Allocator) Next(ctx context.Context) (int64, error) {
	for {
		a.mu.Lock()
		if a.closed {
			a.mu.Unlock()
			return 0, a.closedErr()
		}
		if id, ok := a.takeLocked(1); ok {
			a.mu.Unlock()
			return id, nil
		}
		f := a.flight
		if f == nil {
			f = a.startFlightLocked(false)
		}
		a.mu.Unlock()
		if err := a.await(ctx, f); err != nil {
			return 0, err
		}
	}
}

// Block returns the first of n contiguous ids [first, first+n). They come from
// the current segment when it has n left; otherwise a range of exactly n is
// reserved from the source for this call and the cached segment is kept. If
// fewer than n remain, Block returns the source's error (ErrExhausted when
// max_value is near) and the PostgreSQL source reserves nothing.
func (a *Allocator) Block(ctx context.Context, n int64) (int64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("sequence %q: block size %d: must be positive", a.key, n)
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return 0, a.closedErr()
	}
	id, ok := a.takeLocked(n)
	a.mu.Unlock()
	if ok {
		return id, nil
	}
	first, _, err := a.reserve(ctx, n, true)
	return first, err
}

// Close stops any fetch in progress and waits for it; afterwards no goroutine
// of the Allocator is left. Ids still in memory are lost, as in a crash.
// Close may be called more than once.
func (a *Allocator) Close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
}

// takeLocked hands out n ids from the current segment, switching to the
// prefetched one when the current is used up. It never does I/O.
func (a *Allocator) takeLocked(n int64) (int64, bool) {
	a.dropStaleLocked()
	if a.cur.left == 0 && a.hasReady {
		a.cur, a.hasReady, a.prefetchFailed = a.ready, false, false
	}
	if a.cur.left < n {
		return 0, false
	}
	id := a.cur.take(n)
	if a.cur.left == 0 && a.want > 0 {
		// Used up while young: busier, so twice as many, up to a full step.
		if a.want *= 2; a.want >= a.full {
			a.want = 0
		}
	}
	a.maybePrefetchLocked()
	return id, true
}

// dropStaleLocked drops the segments reserved longer than MaxAge ago.
func (a *Allocator) dropStaleLocked() {
	if a.maxAge <= 0 {
		return
	}
	now := a.now()
	staleReady := a.hasReady && now.Sub(a.ready.at) > a.maxAge
	if staleReady {
		a.hasReady = false
	}
	switch {
	case a.cur.left > 0 && now.Sub(a.cur.at) > a.maxAge:
		used := a.cur.size - a.cur.left
		a.cur.left = 0
		if !a.hasReady { // quiet: no young segment to go on with
			a.want = max(1, used)
		}
	case staleReady && a.cur.left == 0:
		a.want = 1 // quiet: the prefetched segment went unused
	}
}

func (a *Allocator) maybePrefetchLocked() {
	if a.hasReady || a.flight != nil || a.prefetchFailed || a.closed {
		return
	}
	if a.maxAge > 0 && a.cur.size < a.full {
		return // a quiet allocator's: its next would go stale unused
	}
	if float64(a.cur.left) >= a.prefetchAt*float64(a.cur.size) {
		return
	}
	a.startFlightLocked(true)
}

// startFlightLocked starts a segment fetch. A synchronous one (background
// false) also runs on its own goroutine, under the Allocator's context: the
// caller that started it waits like any other, bounded by its own context.
// Must not be called after Close (wg.Add would race with wg.Wait).
func (a *Allocator) startFlightLocked(background bool) *flight {
	f := &flight{done: make(chan struct{}), background: background, size: a.step}
	if a.want > 0 {
		f.size = a.want
	}
	a.flight = f
	a.wg.Add(1)
	go a.run(f)
	return f
}

func (a *Allocator) run(f *flight) {
	defer a.wg.Done()
	ctx, cancel := context.WithTimeout(a.ctx, fetchTimeout)
	defer cancel()
	first, n, err := a.reserve(ctx, f.size, false)

	a.mu.Lock()
	defer a.mu.Unlock()
	a.flight = nil
	switch {
	case err != nil && a.ctx.Err() != nil:
		err = a.closedErr()
	case err != nil && f.background:
		a.prefetchFailed = true
	case err == nil:
		// No segment can be ready here: flights start only when none is.
		a.ready, a.hasReady = segment{next: first, left: n, size: n, at: a.now()}, true
		if f.size == a.step {
			a.full = n
		}
	}
	f.err = err
	close(f.done)
}

// await waits for f. A failed background fetch is not an error for the
// waiter, who goes on to fetch synchronously; a failed synchronous fetch is
// shared by everyone who waited for it.
func (a *Allocator) await(ctx context.Context, f *flight) error {
	select {
	case <-f.done:
	case <-ctx.Done():
		return fmt.Errorf("sequence %q: wait for segment: %w", a.key, context.Cause(ctx))
	}
	if f.err != nil && !f.background {
		return f.err
	}
	return nil
}

func (a *Allocator) closedErr() error {
	return fmt.Errorf("sequence %q: %w", a.key, ErrClosed)
}
