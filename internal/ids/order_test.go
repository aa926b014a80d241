package ids

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// orderProc is one grabber process: its own Redis client, store and order
// numbers, over the test's keys and database.
type orderProc struct {
	rdb    redis.UniversalClient
	store  *redisstore.Store
	orders *OrderNumbers
}

// orderProcs starts n processes sharing one prefix (4 shards) and one
// database, their stores coalescing grabs.
func orderProcs(t *testing.T, n int, res Reserver, cfg OrderConfig) []orderProc {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	if res == nil {
		pool, _ := testenv.Postgres(t)
		res = pgstore.New(pool)
	}
	var out []orderProc
	for i := range n {
		c := rdb
		if i > 0 {
			c = newClient(t)
		}
		s := redisstore.New(c, prefix, 4)
		o := newOrders(t, s, res, cfg)
		t.Cleanup(s.Coalesce(2, 16))
		out = append(out, orderProc{rdb: c, store: s, orders: o})
	}
	return out
}

func newOrders(t testing.TB, s *redisstore.Store, res Reserver, cfg OrderConfig) *OrderNumbers {
	t.Helper()
	o := NewOrderNumbers(s, res, cfg)
	t.Cleanup(o.Close)
	return o
}

// loadEnvelope loads an envelope of n one-cent packets expiring in a day.
func loadEnvelope(t testing.TB, s *redisstore.Store, id int64, n int, now time.Time) {
	t.Helper()
	ps := make([]redisstore.Packet, n)
	for i := range ps {
		ps[i] = redisstore.Packet{ID: id*10_000 + int64(i), AmountCents: 1}
	}
	if _, err := s.LoadEnvelope(context.Background(), id, now.Add(24*time.Hour), int64(n), ps); err != nil {
		t.Fatal(err)
	}
}

// seqOf checks an order number's shape and returns its sequence part.
func seqOf(t testing.TB, no, date string, width int) int64 {
	t.Helper()
	if len(no) != 8+width || no[:8] != date {
		t.Fatalf("order number %q: want %s + %d digits", no, date, width)
	}
	seq, err := strconv.ParseInt(no[8:], 10, 64)
	if err != nil || seq < 1 {
		t.Fatalf("order number %q: sequence %q", no, no[8:])
	}
	return seq
}

// TestOrderNumbersTwoGrabbers: two grabber processes grab 8 envelopes on 4
// shards from 32 goroutines, each user twice, with ranges of 16 so raises
// happen all the time, in the background and on demand, from both (each
// shard needs about 20; with smaller ranges a grab can lose the numbers of
// every raise it waited for to the 31 others, which the store bounds at
// five tries: a starvation real ranges of 100,000 never meet). Every
// grant has its own number, of its shard's sequence; every repeat answers
// the first; PostgreSQL has reserved every counter value handed out.
func TestOrderNumbersTwoGrabbers(t *testing.T) {
	t.Parallel()
	procs := orderProcs(t, 2, nil, OrderConfig{Step: 16})
	ctx := t.Context()
	now := time.Now()
	date := now.UTC().Format("20060102")
	for id := int64(1); id <= 8; id++ {
		loadEnvelope(t, procs[0].store, id, 150, now)
	}
	first := grabTwiceRace(t, procs, now)
	top := wantOrderNosPerShard(t, first, date)
	for shard, c := range top {
		old, _, err := procs[0].orders.pg.ReserveOrderNos(ctx, date, shard, 1)
		if err != nil || old < c {
			t.Errorf("shard %d handed out counter %d; PostgreSQL had reserved up to %d (%v)", shard, c, old, err)
		}
	}
}

// grabTwiceRace has 1,500 users grab from envelopes 1-8 from 32 goroutines,
// each twice, once on either grabber; it fails unless the second grab
// repeats the first. It returns each user's first claim (none if sold out).
func grabTwiceRace(t *testing.T, procs []orderProc, now time.Time) []redisstore.Claim {
	t.Helper()
	ctx := t.Context()
	const users = 1500
	first := make([]redisstore.Claim, users)
	var (
		wg     sync.WaitGroup
		next   atomic.Int64
		failed atomic.Value
	)
	for g := range 32 {
		wg.Go(func() {
			for u := int(next.Add(1) - 1); u < users; u = int(next.Add(1) - 1) {
				id, user := int64(1+u%8), fmt.Sprint("user-", u)
				for try := range 2 {
					c, err := procs[(g+try)%2].store.Grab(ctx, id, user, now)
					switch {
					case errors.Is(err, redisstore.ErrSoldOut) && first[u].OrderNo == "":
					case err != nil:
						failed.CompareAndSwap(nil, fmt.Errorf("%s: %w", user, err))
						return
					case try == 0:
						first[u] = c
					case c.PacketID != first[u].PacketID || c.OrderNo != first[u].OrderNo || !c.Repeat:
						failed.CompareAndSwap(nil, fmt.Errorf("%s: repeat %+v, first %+v", user, c, first[u]))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	return first
}

// wantOrderNosPerShard checks that the 8*150 order numbers granted are
// distinct and each from the sequence of its envelope's shard; it returns the
// highest counter handed out per shard.
func wantOrderNosPerShard(t *testing.T, first []redisstore.Claim, date string) map[int]int64 {
	t.Helper()
	seen := map[string]int{}
	top := map[int]int64{}
	for u, c := range first {
		if c.OrderNo == "" {
			continue
		}
		if prev, dup := seen[c.OrderNo]; dup {
			t.Fatalf("order number %s answered to users %d and %d", c.OrderNo, prev, u)
		}
		seen[c.OrderNo] = u
		shard := (1 + u%8) % 4
		seq := seqOf(t, c.OrderNo, date, 10)
		if int((seq-1)%4) != shard {
			t.Fatalf("user %d on shard %d got %s, of shard %d's sequence", u, shard, c.OrderNo, (seq-1)%4)
		}
		top[shard] = max(top[shard], (seq-1)/4+1)
	}
	if len(seen) != 8*150 {
		t.Fatalf("%d grants, want %d", len(seen), 8*150)
	}
	return top
}

// refusing reserves nothing: for keepers that only tell dates.
type refusing struct{}

func (refusing) ReserveOrderNos(context.Context, string, int, int64) (int64, int64, error) {
	return 0, 0, errors.New("no reservations here")
}

// blockingReserver holds every reservation until released, and counts them.
type blockingReserver struct {
	Reserver
	release chan struct{}
	calls   atomic.Int64
	fail    atomic.Bool
}

// countingReserver is a blockingReserver on the test's database that holds
// nothing back.
func countingReserver(t *testing.T) *blockingReserver {
	pool, _ := testenv.Postgres(t)
	b := &blockingReserver{Reserver: pgstore.New(pool), release: make(chan struct{})}
	close(b.release)
	return b
}

func (b *blockingReserver) ReserveOrderNos(ctx context.Context, date string, shard int, step int64) (int64, int64, error) {
	b.calls.Add(1)
	select {
	case <-b.release:
	case <-ctx.Done():
		return 0, 0, ctx.Err()
	}
	if b.fail.Load() {
		return 0, 0, errors.New("connection refused")
	}
	return b.Reserver.ReserveOrderNos(ctx, date, shard, step)
}

// TestOrderNumbersSingleFlight: 40 grabs that find no number at once wait
// for one raise (of one reservation, the shard's hash being new: a fence
// for the Redis the grabs saw), then are all granted.
func TestOrderNumbersSingleFlight(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.Postgres(t)
	res := &blockingReserver{Reserver: pgstore.New(pool), release: make(chan struct{})}
	rdb, prefix := testenv.Redis(t)
	s := redisstore.New(rdb, prefix, 4)
	o := newOrders(t, s, res, OrderConfig{Step: 100})
	ctx := t.Context()
	now := midday()
	loadEnvelope(t, s, 1, 50, now)
	const grabs = 40
	errs := make(chan error, grabs)
	for u := range grabs {
		go func() {
			_, err := s.Grab(ctx, 1, fmt.Sprint("u", u), now)
			errs <- err
		}()
	}
	waitFor(t, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		f := o.flights[flightKey{1, now.UTC().Format("20060102")}]
		return f != nil && f.waiters == grabs-1
	})
	close(res.release)
	for range grabs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := res.calls.Load(); n != 1 {
		t.Errorf("%d reservations for 40 waiting grabs, want 1", n)
	}
}

// waitFor polls cond until it holds, for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met after 10s")
		}
	}
}

// TestOrderNumbersRaisedAhead: with fewer than half a range left, the next
// range is reserved in the background, so the grabs after it never wait on
// PostgreSQL: the ceiling moves before the counter reaches it.
func TestOrderNumbersRaisedAhead(t *testing.T) {
	t.Parallel()
	procs := orderProcs(t, 1, nil, OrderConfig{Step: 10})
	p := procs[0]
	ctx := t.Context()
	now := time.Now()
	date := now.UTC().Format("20060102")
	loadEnvelope(t, p.store, 1, 30, now)
	key := p.store.Keys().Orders(1, date)
	for u := range 6 { // 4 left of 10: below half
		if _, err := p.store.Grab(ctx, 1, fmt.Sprint("u", u), now); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return p.rdb.HGet(ctx, key, "ceiling").Val() == "20" })
	if c := p.rdb.HGet(ctx, key, "counter").Val(); c != "6" {
		t.Errorf("counter %s after 6 grants, want 6: the raise ahead moved it", c)
	}
}

// TestOrderNumbersPostgresDown: a grab that needs a new range while
// PostgreSQL fails is refused with the error (the service answers 503), a
// holder is answered all the same, and grabs go on once it is back.
func TestOrderNumbersPostgresDown(t *testing.T) {
	t.Parallel()
	res := countingReserver(t)
	rdb, prefix := testenv.Redis(t)
	s := redisstore.New(rdb, prefix, 4)
	newOrders(t, s, res, OrderConfig{Step: 3})
	ctx := t.Context()
	now := time.Now()
	loadEnvelope(t, s, 1, 10, now)
	for u := range 3 {
		if _, err := s.Grab(ctx, 1, fmt.Sprint("u", u), now); err != nil {
			t.Fatal(err)
		}
	}
	// The numbers raised ahead run out within a few grabs.
	res.fail.Store(true)
	var err error
	for u := 3; u < 10 && err == nil; u++ {
		_, err = s.Grab(ctx, 1, fmt.Sprint("u", u), now)
	}
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("grabs with PostgreSQL down: %v, want its error", err)
	}
	if c, err := s.Grab(ctx, 1, "u1", now); err != nil || !c.Repeat {
		t.Errorf("holder with PostgreSQL down = %+v, %v; want the repeat", c, err)
	}
	res.fail.Store(false)
	if _, err := s.Grab(ctx, 1, "late", now); err != nil {
		t.Errorf("grab with PostgreSQL back = %v", err)
	}
}

// TestOrderNumbersNarrowWidth: width 2 over 4 shards leaves shard 1 the 25
// numbers 02, 06, ..., 98, and the range is capped to them; once they are
// used up a grab is ErrOrderNumbersExhausted without asking PostgreSQL, and
// holders are answered.
func TestOrderNumbersNarrowWidth(t *testing.T) {
	t.Parallel()
	res := countingReserver(t)
	rdb, prefix := testenv.Redis(t)
	s := redisstore.New(rdb, prefix, 4)
	o := newOrders(t, s, res, OrderConfig{Width: 2})
	if o.step != 25 {
		t.Fatalf("step %d, want 25: all shard 0 holds", o.step)
	}
	ctx := t.Context()
	now := midday()
	loadEnvelope(t, s, 1, 40, now)
	for u := range 25 {
		if _, err := s.Grab(ctx, 1, fmt.Sprint("u", u), now); err != nil {
			t.Fatal(err)
		}
	}
	calls := res.calls.Load()
	if _, err := s.Grab(ctx, 1, "late", now); !errors.Is(err, redisstore.ErrOrderNumbersExhausted) {
		t.Errorf("grab 26 = %v, want ErrOrderNumbersExhausted", err)
	}
	if c, err := s.Grab(ctx, 1, "u24", now); err != nil || !c.Repeat || c.OrderNo[8:] != "98" {
		t.Errorf("last holder = %+v, %v; want its repeat, number 98", c, err)
	}
	if res.calls.Load() != calls {
		t.Errorf("exhaustion asked PostgreSQL for more")
	}
}

func TestOrderNumbersDate(t *testing.T) {
	t.Parallel()
	havana, err := time.LoadLocation("America/Havana")
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testenv.Redis(t)
	for _, c := range []struct {
		loc      *time.Location
		at       time.Time
		want     string
		wantNext string // a millisecond later
	}{
		{time.UTC, time.Date(2024, 12, 31, 23, 59, 59, 999e6, time.UTC), "20241231", "20250101"},
		{shanghai, time.Date(2024, 3, 9, 15, 59, 59, 999e6, time.UTC), "20240309", "20240310"},
		{shanghai, time.Date(2024, 2, 28, 16, 0, 0, 0, time.UTC), "20240229", "20240229"},
		// Havana's clocks skip 00:00-01:00 on 10 March 2024: that day
		// begins at 05:00 UTC, and the instant before is the 9th's.
		{havana, time.Date(2024, 3, 10, 4, 59, 59, 999e6, time.UTC), "20240309", "20240310"},
	} {
		o := newOrders(t, redisstore.New(rdb, prefix, 4), refusing{}, OrderConfig{Location: c.loc})
		for range 2 { // the second time from the cached day
			if got, next := o.Date(c.at), o.Date(c.at.Add(time.Millisecond)); got != c.want || next != c.wantNext {
				t.Errorf("%s in %s: %s then %s; want %s then %s", c.at, c.loc, got, next, c.want, c.wantNext)
			}
		}
	}
}

func TestOrderNumbersConfig(t *testing.T) {
	t.Parallel()
	s := redisstore.New(nil, "p", 4)
	for _, width := range []int{-1, 19} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("width %d accepted", width)
				}
			}()
			NewOrderNumbers(s, nil, OrderConfig{Width: width})
		}()
	}
	o := NewOrderNumbers(s, nil, OrderConfig{})
	if o.Width() != 10 || o.step != 100_000 {
		t.Errorf("defaults: width %d, step %d; want 10, 100000", o.Width(), o.step)
	}
	o.Close()
	o.Close() // idempotent
	if err := o.Supply(context.Background(), &redisstore.OrderShortage{Shard: 1, Date: "20300101"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Supply after Close = %v, want ErrClosed", err)
	}
	o.Remaining(1, "20300101", 0) // starts nothing after Close
}
