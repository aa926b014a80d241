package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// ordersStore is a store of 4 shards whose grants are numbered width digits,
// step at a time, days in loc.
func ordersStore(t *testing.T, width int, step int64, loc *time.Location) (*redisstore.Store, redis.UniversalClient, *redisstore.MemNumbering) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	s := redisstore.New(rdb, prefix, testShards)
	return s, rdb, redisstore.NumberInMemory(s, width, step, loc)
}

// counter reads a shard's order counter of a day (0 when there is none).
func counter(t *testing.T, rdb redis.UniversalClient, s *redisstore.Store, shard int, date string) int64 {
	t.Helper()
	v, err := rdb.HGet(context.Background(), s.Keys().Orders(shard, date), "counter").Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// splitOrder checks an order number's shape and returns its sequence part.
func splitOrder(t *testing.T, no, date string, width int) int64 {
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

// TestOrderNumbersInterleaveShards: each shard numbers its grants from its
// own counter, counter value c being sequence (c-1)*shards + shard + 1, so
// the numbers of a day are unique across shards and tell the shard.
func TestOrderNumbersInterleaveShards(t *testing.T) {
	t.Parallel()
	s, _, _ := ordersStore(t, 10, 1000, time.UTC)
	ctx := t.Context()
	now := time.Date(2030, 5, 17, 12, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	for id := int64(40); id < 44; id++ { // shards 0..3
		load(t, s, id, 5, now)
		for u := range 5 {
			c, err := s.Grab(ctx, id, "u"+strconv.Itoa(u), now)
			if err != nil {
				t.Fatal(err)
			}
			seq := splitOrder(t, c.OrderNo, "20300517", 10)
			if want := int64(u)*testShards + id%testShards + 1; seq != want || seen[c.OrderNo] {
				t.Errorf("envelope %d, grant %d: order number %s, want sequence %d, once", id, u, c.OrderNo, want)
			}
			seen[c.OrderNo] = true
		}
	}
}

// TestRefusalsTakeNoOrderNumber: a repeat, a sold-out, closed, expired,
// suspended or unknown envelope, and a bad state leave the counter as it
// was; only grants move it.
func TestRefusalsTakeNoOrderNumber(t *testing.T) {
	t.Parallel()
	s, rdb, _ := ordersStore(t, 10, 1000, time.UTC)
	ctx := t.Context()
	now := time.Now()
	date := now.UTC().Format("20060102")
	// Envelopes 1, 5, 9, 13, 17 and 21 are all on shard 1.
	load(t, s, 1, 1, now)
	if _, err := s.Grab(ctx, 1, "holder", now); err != nil {
		t.Fatal(err)
	}
	if c := counter(t, rdb, s, 1, date); c != 1 {
		t.Fatalf("counter after one grant = %d, want 1", c)
	}
	load(t, s, 5, 2, now)
	load(t, s, 9, 2, now)
	load(t, s, 13, 2, now)
	load(t, s, 17, 2, now)
	k := s.Keys()
	rdb.HSet(ctx, k.Meta(5), "status", "closed")
	rdb.HSet(ctx, k.Meta(9), "status", "suspended")
	rdb.HSet(ctx, k.Meta(13), "total", "1e17")
	for _, c := range []struct {
		id   int64
		user string
		at   time.Time
		want error
	}{
		{1, "holder", now, nil}, // a repeat
		{1, "late", now, redisstore.ErrSoldOut},
		{5, "x", now, redisstore.ErrClosed},
		{9, "x", now, redisstore.ErrSuspended},
		{13, "x", now, redisstore.ErrBadState},
		{17, "x", now.Add(2 * time.Hour), redisstore.ErrClosed}, // expired
		{21, "x", now, redisstore.ErrNotLoaded},
	} {
		for range 3 {
			if _, err := s.Grab(ctx, c.id, c.user, c.at); !errors.Is(err, c.want) {
				t.Errorf("grab of %d by %s = %v, want %v", c.id, c.user, err, c.want)
			}
		}
	}
	if c := counter(t, rdb, s, 1, date); c != 1 {
		t.Errorf("counter after refusals and repeats = %d, want 1: they took numbers", c)
	}
}

// TestNarrowWidthHolderStillAnswered: width 2 gives shard 1 of 4 the numbers
// 02, 06, ..., 98 (25 of them). Once they are used up a new grab is
// ErrOrderNumbersExhausted, while every holder's repeat is still answered
// with its packet and number; the next day starts over.
func TestNarrowWidthHolderStillAnswered(t *testing.T) {
	t.Parallel()
	s, _, numbers := ordersStore(t, 2, 7, time.UTC)
	ctx := t.Context()
	now := time.Date(2031, 1, 1, 23, 0, 0, 0, time.UTC)
	load(t, s, 1, 40, now)
	held := map[string]redisstore.Claim{}
	for u := range 25 {
		user := "u" + strconv.Itoa(u)
		c, err := s.Grab(ctx, 1, user, now)
		if err != nil {
			t.Fatalf("grant %d: %v", u, err)
		}
		if seq := splitOrder(t, c.OrderNo, "20310101", 2); seq != int64(4*u+2) {
			t.Fatalf("grant %d: order number %s, want sequence %d", u, c.OrderNo, 4*u+2)
		}
		held[user] = c
	}
	for range 3 {
		if _, err := s.Grab(ctx, 1, "newcomer", now); !errors.Is(err, redisstore.ErrOrderNumbersExhausted) {
			t.Fatalf("grab past the width = %v, want ErrOrderNumbersExhausted", err)
		}
	}
	for user, c := range held {
		again, err := s.Grab(ctx, 1, user, now)
		c.Repeat = true
		if err != nil || again != c {
			t.Errorf("holder %s: %+v, %v; want %+v", user, again, err, c)
		}
	}
	if n := numbers.Supplies(); n > 25/7+2 {
		t.Errorf("%d raises: exhaustion should not ask for more", n)
	}
	c, err := s.Grab(ctx, 1, "newcomer", now.Add(time.Hour))
	if err != nil || c.OrderNo != "2031010202" {
		t.Errorf("next day: %+v, %v; want order number 2031010202", c, err)
	}
}

// TestOrderNumbersDayChange: a grab's order number carries the day of its
// own clock in the numbering's time zone, and each day counts on its own;
// midnight in UTC+8 is 16:00 UTC.
func TestOrderNumbersDayChange(t *testing.T) {
	t.Parallel()
	for _, loc := range []*time.Location{time.UTC, time.FixedZone("CST", 8*3600)} {
		t.Run(loc.String(), func(t *testing.T) {
			t.Parallel()
			s, rdb, _ := ordersStore(t, 10, 1000, loc)
			ctx := t.Context()
			midnight := time.Date(2025, 1, 1, 0, 0, 0, 0, loc)
			load(t, s, 2, 20, midnight.Add(-time.Hour))
			before, after := midnight.Add(-time.Millisecond), midnight
			for i, at := range []time.Time{before, after, before, after, after} {
				c, err := s.Grab(ctx, 2, "u"+strconv.Itoa(i), at)
				if err != nil {
					t.Fatal(err)
				}
				date := at.In(loc).Format("20060102")
				if c.OrderNo[:8] != date {
					t.Errorf("grab at %s: order number %s, want date %s", at.UTC(), c.OrderNo, date)
				}
			}
			if a, b := counter(t, rdb, s, 2, "20241231"), counter(t, rdb, s, 2, "20250101"); a != 2 || b != 3 {
				t.Errorf("counters of Dec 31 and Jan 1 = %d and %d, want 2 and 3", a, b)
			}
		})
	}
}

// TestOrderNumbersFenced: when the shard's order hash was set by another
// Redis (the identity stored differs: a restart from a snapshot, a promoted
// replica), or is gone, the counter is fenced above everything reserved
// before, and no number is answered twice; a holder is answered meanwhile.
func TestOrderNumbersFenced(t *testing.T) {
	t.Parallel()
	s, rdb, numbers := ordersStore(t, 10, 50, time.UTC)
	ctx := t.Context()
	now := time.Now()
	date := now.UTC().Format("20060102")
	key := s.Keys().Orders(1, date)
	load(t, s, 1, 300, now)
	seen := map[string]string{}
	grab := func(user string) {
		t.Helper()
		c, err := s.Grab(ctx, 1, user, now)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seen[c.OrderNo]; dup && prev != user {
			t.Fatalf("order number %s answered to %s and %s", c.OrderNo, prev, user)
		}
		seen[c.OrderNo] = user
	}
	for u := range 20 {
		grab(fmt.Sprint("a", u))
	}
	fences := numbers.Fences() // the day's first grant fenced the missing hash
	// Redis comes back from a copy taken after the 5th grant.
	if err := rdb.HSet(ctx, key, "counter", 5, "identity", "an-older-redis").Err(); err != nil {
		t.Fatal(err)
	}
	grab("a3") // a holder: answered from the claims, no number needed
	if numbers.Fences() != fences {
		t.Fatalf("a holder's repeat fenced the counter")
	}
	for u := range 20 {
		grab(fmt.Sprint("b", u))
	}
	if numbers.Fences() != fences+1 {
		t.Errorf("%d fences, want %d", numbers.Fences(), fences+1)
	}
	// Redis lost the hash altogether.
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	for u := range 20 {
		grab(fmt.Sprint("c", u))
	}
	if numbers.Fences() != fences+2 {
		t.Errorf("%d fences, want %d", numbers.Fences(), fences+2)
	}
	if c := counter(t, rdb, s, 1, date); c <= numbers.Reserved(date, 1)-50 {
		t.Errorf("counter %d not above the reservation before the last fence (%d)", c, numbers.Reserved(date, 1)-50)
	}
}

// TestRaiseOrderCeiling: a raise extends the ceiling when its range starts
// there, skips to the range's start when ranges were reserved for someone
// else in between, and changes nothing when older than the ceiling; with
// another identity stored it is refused until called to fence for this one.
func TestRaiseOrderCeiling(t *testing.T) {
	t.Parallel()
	s, rdb, _ := ordersStore(t, 10, 100, time.UTC)
	ctx := t.Context()
	const date = "20300517"
	_, err := s.RaiseOrderCeiling(ctx, 2, date, 0, 100, "")
	var short *redisstore.OrderShortage
	if !errors.As(err, &short) || short.Identity == "" {
		t.Fatalf("first raise = %v, want a fence for this Redis", err)
	}
	id := short.Identity
	for _, c := range []struct {
		old, new, counter, ceiling int64
		hand                       int64 // counter values handed out before the raise
	}{
		{0, 100, 0, 100, 0},      // the fence
		{100, 200, 30, 200, 30},  // contiguous: the counter goes on
		{300, 400, 300, 400, 0},  // (200, 300] went to someone else: skipped
		{200, 300, 300, 400, 0},  // older than the ceiling: nothing moves
		{400, 500, 310, 500, 10}, // contiguous again
	} {
		if c.hand > 0 {
			if err := rdb.HIncrBy(ctx, s.Keys().Orders(2, date), "counter", c.hand).Err(); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.RaiseOrderCeiling(ctx, 2, date, c.old, c.new, id)
		if err != nil || got != (redisstore.OrderCeiling{Counter: c.counter, Ceiling: c.ceiling}) {
			t.Errorf("raise (%d, %d] = %+v, %v; want counter %d, ceiling %d", c.old, c.new, got, err, c.counter, c.ceiling)
		}
	}
	rdb.HSet(ctx, s.Keys().Orders(2, date), "identity", "another")
	if _, err := s.RaiseOrderCeiling(ctx, 2, date, 500, 600, ""); !errors.As(err, &short) || short.Identity != id {
		t.Errorf("raise over another identity = %v, want a fence for %s", err, id)
	}
	if _, err := s.RaiseOrderCeiling(ctx, 2, date, 500, 600, "stale"); !errors.As(err, &short) {
		t.Errorf("fence for an identity that is not this Redis = %v, want refused", err)
	}
	got, err := s.RaiseOrderCeiling(ctx, 2, date, 600, 700, id)
	if err != nil || got != (redisstore.OrderCeiling{Counter: 600, Ceiling: 700}) {
		t.Errorf("fence = %+v, %v; want the counter at 600", got, err)
	}
	for _, bad := range [][2]int64{{5, 5}, {6, 5}, {-1, 5}, {0, 1 << 53}} {
		if _, err := s.RaiseOrderCeiling(ctx, 2, date, bad[0], bad[1], ""); err == nil || errors.As(err, &short) {
			t.Errorf("raise (%d, %d] = %v, want an argument error", bad[0], bad[1], err)
		}
	}
}
