package ids

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

func newOrders(t testing.TB, rdb redis.UniversalClient, keys redisstore.Keys, cfg OrderConfig) *OrderNumbers {
	t.Helper()
	o := NewOrderNumbers(rdb, keys, cfg)
	t.Cleanup(o.Close)
	return o
}

func mustOrder(t testing.TB, ctx context.Context, o *OrderNumbers) string {
	t.Helper()
	n, err := o.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return n
}

// splitOrder checks the format and returns the date and the sequence.
func splitOrder(t testing.TB, n string, width int) (string, int64) {
	t.Helper()
	if len(n) != 8+width {
		t.Fatalf("order number %q: %d chars, want %d", n, len(n), 8+width)
	}
	if _, err := time.Parse("20060102", n[:8]); err != nil {
		t.Fatalf("order number %q: date: %v", n, err)
	}
	seq, err := strconv.ParseInt(n[8:], 10, 64)
	if err != nil || seq < 1 {
		t.Fatalf("order number %q: sequence %q", n, n[8:])
	}
	return n[:8], seq
}

func TestOrderFormat(t *testing.T) {
	t.Parallel()
	keys, rdb, _ := twoClients(t)
	ctx := testCtx(t)
	// 16:30 UTC is already the next day in Shanghai.
	clk := testenv.NewClock(time.Date(2024, 3, 9, 16, 30, 0, 0, time.UTC))
	o := newOrders(t, rdb, keys, OrderConfig{Location: shanghai, Now: clk.Now})

	for i := 1; i <= 3; i++ {
		if got, want := mustOrder(t, ctx, o), fmt.Sprintf("20240310%010d", i); got != want {
			t.Fatalf("order number %d = %q, want %q", i, got, want)
		}
	}
	if n := getInt(t, rdb, keys.OrderDay("20240310")); n != defaultOrderSegment {
		t.Fatalf("day counter = %d, want one segment of %d", n, defaultOrderSegment)
	}
	checkDayTTL(t, rdb, keys.OrderDay("20240310"))

	w := newOrders(t, rdb, keys, OrderConfig{Width: 4, Location: shanghai, Now: clk.Now})
	// The second instance starts after the first's segment.
	if got, want := mustOrder(t, ctx, w), "202403101001"; got != want {
		t.Fatalf("width 4: %q, want %q", got, want)
	}
}

func TestOrderConfigPanics(t *testing.T) {
	t.Parallel()
	keys, rdb, _ := twoClients(t)
	for _, width := range []int{-1, 19} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("width %d accepted", width)
				}
			}()
			NewOrderNumbers(rdb, keys, OrderConfig{Width: width})
		}()
	}
}

// TestOrderUniqueConcurrent draws 100,000 numbers from two generators on the
// same keys, as two processes would, with small segments so that many
// prefetches and waits happen.
func TestOrderUniqueConcurrent(t *testing.T) {
	t.Parallel()
	keys, rdbA, rdbB := twoClients(t)
	ctx := testCtx(t)
	gens := []*OrderNumbers{
		newOrders(t, rdbA, keys, OrderConfig{Segment: 100}),
		newOrders(t, rdbB, keys, OrderConfig{Segment: 37, PrefetchAt: 0.5}),
	}
	const (
		total      = 100_000
		goroutines = 32
	)
	results := make([][]string, goroutines)
	var (
		wg     sync.WaitGroup
		failed atomic.Value
	)
	for g := range goroutines {
		o := gens[g%len(gens)]
		wg.Go(func() {
			results[g] = make([]string, 0, total/goroutines)
			for range total / goroutines {
				n, err := o.Next(ctx)
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				results[g] = append(results[g], n)
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	seen := newSet()
	maxSeq := make(map[string]int64) // per date, should the test cross midnight
	for _, ns := range results {
		for _, n := range ns {
			if !seen.add(n) {
				t.Fatalf("order number %q handed out twice", n)
			}
			date, seq := splitOrder(t, n, defaultOrderWidth)
			maxSeq[date] = max(maxSeq[date], seq)
		}
	}
	if got := seen.len(); got != total/goroutines*goroutines {
		t.Fatalf("%d distinct numbers", got)
	}
	// Each day's counter is ahead of every number handed out: a new process
	// would continue above them.
	for date, m := range maxSeq {
		if c := getInt(t, rdbA, keys.OrderDay(date)); c < m {
			t.Fatalf("counter of %s = %d, below handed-out sequence %d", date, c, m)
		}
	}
}

// TestOrderDayChange: the cached segment of a day is dropped at midnight,
// numbers carry the day they are issued on and none repeats, including when
// the clock steps back.
func TestOrderDayChange(t *testing.T) {
	t.Parallel()
	for _, loc := range []*time.Location{time.UTC, shanghai} {
		t.Run(loc.String(), func(t *testing.T) {
			t.Parallel()
			keys, rdb, _ := twoClients(t)
			ctx := testCtx(t)
			clk := testenv.NewClock(lastInstant(2024, 12, 31, loc))
			o := newOrders(t, rdb, keys, OrderConfig{Segment: 100, Location: loc, Now: clk.Now})
			seen := newSet()
			draw := func(date string, wantFirst int64, n int) {
				t.Helper()
				for i := range int64(n) {
					num := mustOrder(t, ctx, o)
					if !seen.add(num) {
						t.Fatalf("order number %q repeated", num)
					}
					d, seq := splitOrder(t, num, defaultOrderWidth)
					if d != date || seq != wantFirst+i {
						t.Fatalf("order number %q, want date %s sequence %d", num, date, wantFirst+i)
					}
				}
			}

			draw("20241231", 1, 5) // 95 numbers of Dec 31 stay cached
			clk.Set(time.Date(2025, 1, 1, 0, 0, 0, 0, loc))
			// Numbering starts over from the new day's counter: the cached
			// segment was not used under the new date.
			draw("20250101", 1, 150)
			if c := getInt(t, rdb, keys.OrderDay("20241231")); c != 100 {
				t.Fatalf("Dec 31 counter = %d, want 100: one segment", c)
			}
			// Stepping back reopens Dec 31 above everything it handed out.
			clk.Set(lastInstant(2024, 12, 31, loc))
			draw("20241231", 101, 3)
			clk.Set(time.Date(2025, 1, 1, 0, 0, 0, 1, loc))
			draw("20250101", 201, 3)
		})
	}
}

// flipClock reports the last instant of a day for its first calls and
// midnight afterwards.
type flipClock struct {
	calls  atomic.Int64
	before int64
	at     time.Time
}

func (c *flipClock) Now() time.Time {
	if c.calls.Add(1) <= c.before {
		return c.at.Add(-time.Millisecond)
	}
	return c.at
}

// TestOrderDayFlipsDuringFetch: Next reads the clock before and after taking
// a number. If midnight passes while the first segment of the day is fetched,
// the number of the old day is dropped and one of the new day returned.
func TestOrderDayFlipsDuringFetch(t *testing.T) {
	t.Parallel()
	keys, rdb, _ := twoClients(t)
	ctx := testCtx(t)
	clk := &flipClock{before: 1, at: time.Date(2025, 1, 1, 0, 0, 0, 0, shanghai)}
	o := newOrders(t, rdb, keys, OrderConfig{Segment: 10, Location: shanghai, Now: clk.Now})

	if got, want := mustOrder(t, ctx, o), "202501010000000001"; got != want {
		t.Fatalf("Next across midnight = %q, want %q", got, want)
	}
	if c := getInt(t, rdb, keys.OrderDay("20241231")); c != 10 {
		t.Fatalf("Dec 31 counter = %d: the old day's segment was not taken first", c)
	}
}

// TestOrderDayChangeConcurrent moves the clock past midnight while many
// goroutines of two generators draw numbers: each number carries a day the
// clock showed during its call, and none repeats.
func TestOrderDayChangeConcurrent(t *testing.T) {
	t.Parallel()
	keys, rdbA, rdbB := twoClients(t)
	ctx := testCtx(t)
	midnight := time.Date(2025, 1, 1, 0, 0, 0, 0, shanghai)
	clk := testenv.NewClock(midnight.Add(-time.Millisecond))
	gens := []*OrderNumbers{
		newOrders(t, rdbA, keys, OrderConfig{Segment: 50, Location: shanghai, Now: clk.Now}),
		newOrders(t, rdbB, keys, OrderConfig{Segment: 20, Location: shanghai, Now: clk.Now}),
	}
	seen := newSet()
	var (
		wg      sync.WaitGroup
		drawn   atomic.Int64
		failed  atomic.Value
		perDate sync.Map // date -> *atomic.Int64
	)
	for g := range 16 {
		o := gens[g%2]
		wg.Go(func() {
			for range 500 {
				before := clk.Now().Format("20060102")
				n, err := o.Next(ctx)
				after := clk.Now().Format("20060102")
				if err == nil && !seen.add(n) {
					err = fmt.Errorf("order number %q repeated", n)
				}
				if err == nil && n[:8] != before && n[:8] != after {
					err = fmt.Errorf("order number %q issued between %s and %s", n, before, after)
				}
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
				c, _ := perDate.LoadOrStore(n[:8], new(atomic.Int64))
				c.(*atomic.Int64).Add(1)
				if drawn.Add(1) == 3000 {
					clk.Set(midnight)
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	for _, date := range []string{"20241231", "20250101"} {
		c, ok := perDate.Load(date)
		if !ok || c.(*atomic.Int64).Load() == 0 {
			t.Fatalf("no number dated %s", date)
		}
	}
	// After the flip no generator may still hand out Dec 31.
	for _, o := range gens {
		if n := mustOrder(t, ctx, o); n[:8] != "20250101" {
			t.Fatalf("after midnight: %q", n)
		}
	}
}

// TestOrderExhausted: width 2 holds 01..99 per day. Two generators together
// hand out each exactly once, then only ErrExhausted; the next day starts
// over.
func TestOrderExhausted(t *testing.T) {
	t.Parallel()
	keys, rdbA, rdbB := twoClients(t)
	ctx := testCtx(t)
	clk := testenv.NewClock(time.Date(2024, 2, 29, 12, 0, 0, 0, shanghai))
	cfg := OrderConfig{Width: 2, Segment: 7, Location: shanghai, Now: clk.Now}
	gens := []*OrderNumbers{newOrders(t, rdbA, keys, cfg), newOrders(t, rdbB, keys, cfg)}

	seen := newSet()
	var (
		wg     sync.WaitGroup
		failed atomic.Value
	)
	for g := range 8 {
		o := gens[g%2]
		wg.Go(func() {
			for {
				n, err := o.Next(ctx)
				if errors.Is(err, ErrExhausted) {
					return
				}
				if err == nil && !seen.add(n) {
					err = fmt.Errorf("order number %q repeated", n)
				}
				if err == nil && len(n) != 10 {
					err = fmt.Errorf("order number %q longer than date + 2 digits", n)
				}
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 99; i++ {
		if n := fmt.Sprintf("20240229%02d", i); seen.add(n) {
			t.Fatalf("%s never handed out", n)
		}
	}
	for _, o := range gens {
		if n, err := o.Next(ctx); !errors.Is(err, ErrExhausted) {
			t.Fatalf("Next after 99 = %q, %v; want ErrExhausted", n, err)
		}
	}
	clk.Set(time.Date(2024, 3, 1, 0, 0, 0, 0, shanghai))
	if got := mustOrder(t, ctx, gens[0]); got != "2024030101" {
		t.Fatalf("next day = %q, want 2024030101", got)
	}
}

func TestOrderClose(t *testing.T) {
	t.Parallel()
	keys, rdb, _ := twoClients(t)
	ctx := testCtx(t)
	o := NewOrderNumbers(rdb, keys, OrderConfig{Segment: 10})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				if _, err := o.Next(ctx); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Errorf("Next during Close: %v", err)
					}
					return
				}
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	o.Close()
	wg.Wait()
	if _, err := o.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	o.Close() // idempotent
}

// TestOrderNumbersAfterRedisLoss: when Redis comes back without its counters,
// no number answered before is handed out again, neither by a new process
// nor by one still holding numbers it took before the loss.
func TestOrderNumbersAfterRedisLoss(t *testing.T) {
	t.Parallel()
	keys, rdb, _ := twoClients(t)
	ctx := testCtx(t)
	var written atomic.Int64 // the highest number PostgreSQL holds, as Floor reports it
	floor := func(_ context.Context, date string, width int) (int64, error) {
		if len(date) != 8 || width != 10 {
			return 0, fmt.Errorf("floor asked for %q width %d", date, width)
		}
		return written.Load(), nil
	}
	before := newOrders(t, rdb, keys, OrderConfig{Segment: 10, Floor: floor})
	seen := map[string]bool{}
	var highest int64
	for range 25 {
		n := mustOrder(t, ctx, before)
		seen[n] = true
		_, seq := splitOrder(t, n, 10)
		highest = max(highest, seq)
	}
	written.Store(highest - 5) // the last few are not written yet
	testenv.DeleteKeys(ctx, rdb, "*"+keys.OrderDay("*")[1:])
	testenv.DeleteKeys(ctx, rdb, "*"+keys.OrderGuard()[1:])

	after := newOrders(t, rdb, keys, OrderConfig{Segment: 10, Floor: floor})
	for i := range 40 {
		o := after
		if i%2 == 0 {
			o = before // still serving the rest of its segments
		}
		n := mustOrder(t, ctx, o)
		if seen[n] {
			t.Fatalf("order number %s handed out twice across the loss", n)
		}
		seen[n] = true
		if o == after {
			if _, seq := splitOrder(t, n, 10); seq <= highest {
				t.Fatalf("after the loss a new process got %d, at or below %d answered before", seq, highest)
			}
		}
	}
}
