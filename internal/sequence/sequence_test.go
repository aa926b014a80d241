package sequence

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/testenv"
)

// waitLimit bounds every wait that only ends when the code under test works;
// a passing test never comes near it.
const waitLimit = 10 * time.Second

func newAllocator(t testing.TB, pool *pgxpool.Pool, key string, opt Options) *Allocator {
	a := New(pool, key, opt)
	t.Cleanup(a.Close)
	return a
}

func mustNext(t testing.TB, ctx context.Context, a *Allocator) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	id, err := a.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return id
}

type row struct {
	current, max int64
	updated      time.Time
}

func readRow(t testing.TB, ctx context.Context, pool *pgxpool.Pool, key string) row {
	t.Helper()
	var r row
	err := pool.QueryRow(ctx,
		"SELECT current_value, max_value, updated_at FROM sequence_numbers WHERE key_name = $1", key).
		Scan(&r.current, &r.max, &r.updated)
	if err != nil {
		t.Fatalf("read row %q: %v", key, err)
	}
	return r
}

func exec(t testing.TB, ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// fetchLog records the sizes OnFetch reports.
type fetchLog struct {
	mu    sync.Mutex
	sizes []int64
}

func (l *fetchLog) record(_ string, n int64, _ time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sizes = append(l.sizes, n)
}

func (l *fetchLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sizes)
}

// waitFor polls cond until it holds or waitLimit passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestNextStrictlyIncreasing(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	a := newAllocator(t, pool, "envelope", Options{})

	first := mustNext(t, ctx, a)
	if first != 1001 {
		t.Fatalf("first envelope id = %d, want 1001", first)
	}
	prev := first
	// 1000 ids cross ten segments of the row's step (100).
	for range 999 {
		id := mustNext(t, ctx, a)
		if id <= prev {
			t.Fatalf("Next = %d after %d: not increasing", id, prev)
		}
		if id != prev+1 {
			t.Fatalf("Next = %d after %d: gap with a single allocator", id, prev)
		}
		prev = id
	}
	if r := readRow(t, ctx, pool, "envelope"); r.current < prev {
		t.Fatalf("current_value %d below handed-out id %d", r.current, prev)
	}
}

func TestConcurrentAllocatorsNeverRepeat(t *testing.T) {
	t.Parallel()
	poolA, url := testenv.Postgres(t)
	ctx := t.Context()
	// A second pool, as a second process would have.
	poolB, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("second pool: %v", err)
	}
	t.Cleanup(poolB.Close)

	const (
		key        = "packet"
		goroutines = 16
		ops        = 150
	)
	allocs := []*Allocator{
		newAllocator(t, poolA, key, Options{Step: 7}),
		newAllocator(t, poolB, key, Options{Step: 7}),
	}
	results := make([][]int64, len(allocs)*goroutines)
	errs := make(chan error, len(results))
	var wg sync.WaitGroup
	for i := range results {
		a := allocs[i%len(allocs)]
		wg.Go(func() {
			ids, err := draw(ctx, a, ops)
			results[i] = ids
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	final := readRow(t, ctx, poolA, key).current
	seen := make(map[int64]bool)
	for _, ids := range results {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("id %d handed out twice", id)
			}
			seen[id] = true
			if id < 1 || id > final {
				t.Fatalf("id %d outside (0, current_value %d]", id, final)
			}
		}
	}
	if len(seen) < len(results)*ops {
		t.Fatalf("only %d ids for %d calls", len(seen), len(results)*ops)
	}
}

// draw mixes Next and Block with random sizes and returns every id received.
func draw(ctx context.Context, a *Allocator, ops int) ([]int64, error) {
	var ids []int64
	for range ops {
		if rand.IntN(2) == 0 {
			id, err := a.Next(ctx)
			if err != nil {
				return ids, err
			}
			ids = append(ids, id)
			continue
		}
		n := 1 + rand.Int64N(12) // both below and above the step of 7
		first, err := a.Block(ctx, n)
		if err != nil {
			return ids, err
		}
		for id := first; id < first+n; id++ {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func TestAbandonedAllocatorLosesAtMostItsSegments(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	const step = 10
	var log fetchLog
	a := New(pool, "envelope", Options{Step: step, OnFetch: log.record})

	// 8 of 10 leaves 2 < 0.25*10, which starts the prefetch: A then holds
	// two segments, the worst case.
	var maxA int64
	for range 8 {
		maxA = max(maxA, mustNext(t, ctx, a))
	}
	waitFor(t, "the prefetch", func() bool { return log.count() == 2 })
	a.Close() // as a crash would leave it: nothing handed back
	fetchedEnd := readRow(t, ctx, pool, "envelope").current

	b := newAllocator(t, pool, "envelope", Options{Step: step})
	idB := mustNext(t, ctx, b)
	if idB <= maxA {
		t.Fatalf("B's first id %d not above A's ids (max %d)", idB, maxA)
	}
	if idB > fetchedEnd+1 {
		t.Fatalf("B's first id %d beyond A's last range end %d + 1", idB, fetchedEnd)
	}
	if gap := idB - maxA - 1; gap > 2*step {
		t.Fatalf("%d ids lost, more than two segments of %d", gap, step)
	}
}

func TestExhaustedNext(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	exec(t, ctx, pool, "UPDATE sequence_numbers SET max_value = current_value + 25 WHERE key_name = $1", "envelope")
	a := newAllocator(t, pool, "envelope", Options{Step: 10})

	seen := make(map[int64]bool)
	var err error
	for range 100 {
		var id int64
		if id, err = a.Next(ctx); err != nil {
			break
		}
		if seen[id] {
			t.Fatalf("id %d handed out twice", id)
		}
		if id > 1025 {
			t.Fatalf("id %d above max_value 1025", id)
		}
		seen[id] = true
	}
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("after %d ids: err = %v, want ErrExhausted", len(seen), err)
	}
	if !strings.Contains(err.Error(), "envelope") {
		t.Errorf("error %q does not name the key", err)
	}
	// Two full segments and the short last one: every id up to max_value.
	if len(seen) != 25 {
		t.Fatalf("%d ids before exhaustion, want 25", len(seen))
	}
	if _, err := a.Next(ctx); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Next after exhaustion: err = %v, want ErrExhausted", err)
	}
}

func TestExhaustedBlockConsumesNothing(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	exec(t, ctx, pool, "UPDATE sequence_numbers SET max_value = current_value + 25 WHERE key_name = $1", "envelope")
	before := readRow(t, ctx, pool, "envelope")
	a := newAllocator(t, pool, "envelope", Options{Step: 10})

	if _, err := a.Block(ctx, 26); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Block(26) with 25 left: err = %v, want ErrExhausted", err)
	}
	if after := readRow(t, ctx, pool, "envelope"); after != before {
		t.Fatalf("row changed by a failed Block: %+v -> %+v", before, after)
	}
	first, err := a.Block(ctx, 25)
	if err != nil || first != 1001 {
		t.Fatalf("Block(25) = %d, %v; want 1001", first, err)
	}
	if r := readRow(t, ctx, pool, "envelope"); r.current != r.max {
		t.Fatalf("current_value %d after taking all, want max_value %d", r.current, r.max)
	}
	if _, err := a.Next(ctx); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Next after the last block: err = %v, want ErrExhausted", err)
	}
}

func TestBlockKeepsCachedSegment(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	a := newAllocator(t, pool, "envelope", Options{Step: 10})

	if id := mustNext(t, ctx, a); id != 1001 {
		t.Fatalf("Next = %d, want 1001", id)
	}
	// More than the segment holds: a dedicated range after the segment.
	if first, err := a.Block(ctx, 50); err != nil || first != 1011 {
		t.Fatalf("Block(50) = %d, %v; want 1011", first, err)
	}
	if r := readRow(t, ctx, pool, "envelope"); r.current != 1060 {
		t.Fatalf("current_value = %d after the block, want 1060", r.current)
	}
	// The cached segment is still served, by Next and by small blocks.
	if id := mustNext(t, ctx, a); id != 1002 {
		t.Fatalf("Next after the block = %d, want 1002", id)
	}
	if first, err := a.Block(ctx, 3); err != nil || first != 1003 {
		t.Fatalf("Block(3) = %d, %v; want 1003 from memory", first, err)
	}
	if id := mustNext(t, ctx, a); id != 1006 {
		t.Fatalf("Next = %d, want 1006", id)
	}
	if _, err := a.Block(ctx, 0); err == nil {
		t.Fatal("Block(0) succeeded")
	}
}

// TestPrefetch holds each segment fetch inside OnFetch until the test lets it
// go. The ids after the prefetch threshold are drawn while the fetch of the
// next segment is held, which proves both that the fetch started before the
// segment ran out and that Next did not wait for it.
func TestPrefetch(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	const (
		step     = 100
		segments = 5
		trigger  = 76 // after the 76th id 24 are left: below 0.25 of 100
	)
	fetched := make(chan int64, segments+2)
	release := make(chan struct{}, segments+2)
	a := New(pool, "envelope", Options{Step: step, OnFetch: func(_ string, n int64, _ time.Duration) {
		fetched <- n
		<-release
	}})
	defer a.Close()
	defer close(release) // before Close: a held fetch must be able to finish

	release <- struct{}{} // the first fetch is synchronous: let it through
	want := int64(1001)
	for k := range segments {
		for j := 1; j <= step; j++ {
			if id := mustNext(t, ctx, a); id != want {
				t.Fatalf("segment %d, draw %d: id %d, want %d", k, j, id, want)
			}
			want++
			switch {
			case k == 0 && j == 1:
				expectFetch(t, fetched, step, "the first segment")
			case j < trigger:
				expectNoFetch(t, fetched, k, j)
			case j == trigger:
				// Held in OnFetch: committed, not yet in memory.
				expectFetch(t, fetched, step, "the prefetch")
			case j == step:
				expectNoFetch(t, fetched, k, j)
				release <- struct{}{}
			}
		}
	}
}

func expectFetch(t *testing.T, fetched <-chan int64, size int64, what string) {
	t.Helper()
	select {
	case n := <-fetched:
		if n != size {
			t.Fatalf("%s fetched %d ids, want %d", what, n, size)
		}
	case <-time.After(waitLimit):
		t.Fatalf("no fetch for %s", what)
	}
}

func expectNoFetch(t *testing.T, fetched <-chan int64, k, j int) {
	t.Helper()
	select {
	case n := <-fetched:
		t.Fatalf("segment %d, draw %d: unexpected fetch of %d ids", k, j, n)
	default:
	}
}

func TestFailedPrefetchRetriedByNextCaller(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	a := newAllocator(t, pool, "envelope", Options{Step: 10})

	mustNext(t, ctx, a) // segment 1001..1010
	// Without its row the prefetch fails.
	exec(t, ctx, pool, "DELETE FROM sequence_numbers WHERE key_name = $1", "envelope")
	for range 7 {
		mustNext(t, ctx, a) // the 8th id starts the prefetch
	}
	waitFor(t, "the failed prefetch", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.prefetchFailed
	})
	for range 2 {
		mustNext(t, ctx, a) // the segment still serves, without new attempts
	}
	a.mu.Lock()
	inFlight := a.flight != nil
	a.mu.Unlock()
	if inFlight {
		t.Fatal("a failed prefetch was retried in the background")
	}
	// The segment is used up: the caller retries synchronously and, as
	// that fails too, gets the error.
	if _, err := a.Next(ctx); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Next with no row: err = %v, want ErrUnknownKey", err)
	}
	exec(t, ctx, pool, "INSERT INTO sequence_numbers (key_name, current_value, max_value, step) VALUES ($1, 1010, 9007199254740991, 100)", "envelope")
	if id := mustNext(t, ctx, a); id != 1011 {
		t.Fatalf("Next after the row is back = %d, want 1011", id)
	}
	// A new segment prefetches again.
	for range 7 {
		mustNext(t, ctx, a) // 1018 leaves 2 of 10
	}
	waitFor(t, "the prefetch of the new segment", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.hasReady
	})
}

func TestUnknownKey(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	a := newAllocator(t, pool, "no_such_key", Options{})

	_, err := a.Next(ctx)
	if !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Next: err = %v, want ErrUnknownKey", err)
	}
	if !strings.Contains(err.Error(), "no_such_key") {
		t.Errorf("error %q does not name the key", err)
	}
	if _, err := a.Block(ctx, 5); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Block: err = %v, want ErrUnknownKey", err)
	}
}

func TestCloseDuringPrefetch(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	a := New(pool, "envelope", Options{Step: 10})
	mustNext(t, ctx, a)

	// Hold the row lock so the prefetch blocks inside the database.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, "SELECT 1 FROM sequence_numbers WHERE key_name = 'envelope' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	for range 7 {
		mustNext(t, ctx, a) // the 8th id starts the prefetch
	}
	waitFor(t, "the prefetch to wait on the row lock", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return err == nil && n == 1
	})
	a.mu.Lock()
	f := a.flight
	a.mu.Unlock()
	if f == nil || !f.background {
		t.Fatalf("no background fetch in flight: %+v", f)
	}

	closed := make(chan struct{})
	go func() {
		a.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(waitLimit):
		t.Fatal("Close did not return while a prefetch was in flight")
	}
	// Close waited for the fetch goroutine, which finishes its flight last.
	select {
	case <-f.done:
	default:
		t.Fatal("the prefetch was still running after Close")
	}
	if _, err := a.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: err = %v, want ErrClosed", err)
	}
	a.Close() // idempotent
}

func BenchmarkNext(b *testing.B) {
	pool, _ := testenv.Postgres(b)
	ctx := context.Background()
	a := newAllocator(b, pool, "packet", Options{})
	var failed atomic.Bool
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.Next(ctx); err != nil {
				failed.Store(true)
			}
		}
	})
	if failed.Load() {
		b.Fatal("Next failed")
	}
}

// With MaxAge, a process that took an id long ago does not hand out the
// rest of that segment after another process has taken higher ids: its next
// id is above them. Without MaxAge it would be the one after its first.
func TestMaxAgeKeepsIdsInTheOrderTheyAreTaken(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	var clock atomic.Int64 // seconds past an arbitrary instant
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	quiet := newAllocator(t, pool, "envelope", Options{Step: 100, MaxAge: time.Second})
	quiet.now = func() time.Time { return base.Add(time.Duration(clock.Load()) * time.Second) }
	busy := newAllocator(t, pool, "envelope", Options{Step: 100})

	first := mustNext(t, ctx, quiet)
	if again := mustNext(t, ctx, quiet); again != first+1 {
		t.Fatalf("within MaxAge: %d after %d, want the segment's next", again, first)
	}
	other := mustNext(t, ctx, busy)
	clock.Add(2)
	later := mustNext(t, ctx, quiet)
	if later <= other {
		t.Fatalf("after MaxAge the quiet allocator handed out %d, below %d the other took before", later, other)
	}
	// And the segment it reserved then is used while it is young.
	if next := mustNext(t, ctx, quiet); next != later+1 {
		t.Fatalf("a fresh segment: %d after %d, want the next", next, later)
	}
}

// Quiet processes with MaxAge take their ids nearly one at a time, in turn,
// not the first id of a fresh segment each: envelope ids pick their shard
// (id modulo the shards), and first ids of equal steps (1001, 1101, ...)
// would all pick the same few shards.
func TestMaxAgeQuietProcessesSpreadOverShards(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	var clock atomic.Int64
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var procs [3]*Allocator
	for i := range procs {
		procs[i] = newAllocator(t, pool, "envelope", Options{Step: 100, MaxAge: time.Second})
		procs[i].now = func() time.Time { return base.Add(time.Duration(clock.Load()) * time.Second) }
	}
	const shards = 16
	seen := map[int64]bool{}
	last := int64(0)
	for i := range 48 {
		clock.Add(2) // a quiet spell before every envelope
		id := mustNext(t, ctx, procs[i%len(procs)])
		if id <= last {
			t.Fatalf("envelope %d got id %d after %d, created earlier", i, id, last)
		}
		last = id
		seen[id%shards] = true
	}
	if len(seen) < shards*3/4 {
		t.Errorf("48 envelopes of quiet processes fell on %d of %d shards", len(seen), shards)
	}
	// Each process's first segment is a full step; after it, a quiet
	// process wastes at most one id an envelope.
	if used := readRow(t, ctx, pool, "envelope").current - 1000; used > int64(len(procs)*100+2*48) {
		t.Errorf("48 envelopes used up %d ids", used)
	}
}

// A busy allocator whose segment goes stale while a young prefetched one
// waits goes on with that one as any busy allocator does: full steps,
// fetched in the background, none while a caller waits.
func TestMaxAgeBusyAllocatorKeepsPrefetching(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	var clock atomic.Int64 // milliseconds
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var log fetchLog
	a := newAllocator(t, pool, "envelope", Options{Step: 100, MaxAge: time.Second, OnFetch: log.record})
	a.now = func() time.Time { return base.Add(time.Duration(clock.Load()) * time.Millisecond) }

	first := mustNext(t, ctx, a) // the first segment, reserved at 0 ms
	clock.Store(800)
	for range 79 {
		mustNext(t, ctx, a) // the 76th starts the prefetch, reserved at 800 ms
	}
	waitFor(t, "the prefetch", func() bool { return log.count() == 2 })
	clock.Store(1500) // the first segment is stale, the prefetched one young
	if id := mustNext(t, ctx, a); id != first+100 {
		t.Fatalf("after the stale segment: %d, want the prefetched segment's first, %d", id, first+100)
	}
	for range 79 {
		mustNext(t, ctx, a)
	}
	waitFor(t, "the next prefetch", func() bool { return log.count() == 3 })
	log.mu.Lock()
	defer log.mu.Unlock()
	for i, n := range log.sizes {
		if n != 100 {
			t.Errorf("fetch %d reserved %d ids, want full steps of 100", i, n)
		}
	}
}
