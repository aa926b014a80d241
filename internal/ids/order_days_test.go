package ids

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// In the last hour of a day every shard's range of the next day is reserved
// ahead, so a PostgreSQL down at midnight does not stop the next day's
// first grabs (here the night before New York's 23-hour day).
func TestOrderNumbersNextDayReservedAhead(t *testing.T) {
	t.Parallel()
	res := countingReserver(t)
	rdb, prefix := testenv.Redis(t)
	s := redisstore.New(rdb, prefix, 4)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	newOrders(t, s, res, OrderConfig{Step: 1000, Location: ny})
	ctx := t.Context()
	evening := time.Date(2026, 3, 7, 23, 30, 0, 0, ny)
	loadEnvelope(t, s, 1, 10, evening)
	if _, err := s.Grab(ctx, 1, "u0", evening); err != nil {
		t.Fatal(err)
	}
	for shard := range 4 {
		key := s.Keys().Orders(shard, "20260308")
		waitFor(t, func() bool { return rdb.HGet(ctx, key, "ceiling").Val() != "" })
	}
	res.fail.Store(true)
	for i, at := range []time.Time{lastInstant(2026, 3, 7, ny), time.Date(2026, 3, 8, 0, 0, 0, 1e6, ny)} {
		c, err := s.Grab(ctx, 1, fmt.Sprint("u", i+1), at)
		if want := at.In(ny).Format("20060102"); err != nil || c.OrderNo[:8] != want {
			t.Errorf("grab at %s with PostgreSQL down = %q, %v; want an order number of %s", at, c.OrderNo, err, want)
		}
	}
}

// While PostgreSQL is down each grab that finds no number may start a
// raise; their failures are logged at most once every 10 s, with a count.
func TestOrderNumbersFailedRaisesLoggedInSummary(t *testing.T) {
	t.Parallel()
	res := countingReserver(t)
	res.fail.Store(true)
	rdb, prefix := testenv.Redis(t)
	s := redisstore.New(rdb, prefix, 4)
	core, logs := observer.New(zap.WarnLevel)
	newOrders(t, s, res, OrderConfig{Step: 3, Log: zap.New(core)})
	now := midday()
	loadEnvelope(t, s, 1, 50, now)
	failed := 0
	for u := range 30 {
		if _, err := s.Grab(t.Context(), 1, fmt.Sprint("u", u), now); err != nil {
			failed++
		}
	}
	lines := logs.FilterMessage("order numbers not raised").All()
	if failed < 20 || len(lines) != 1 {
		t.Fatalf("%d grabs failed, %d lines logged; want at least 20 and one line", failed, len(lines))
	}
	if n := lines[0].ContextMap()["count"]; n != int64(1) {
		t.Errorf("first line's count = %v, want 1 (the failures since the last line)", n)
	}
}

// Grabs around midnight reach Date a little out of order: the days flip
// back and forth, and the next day's ranges are still reserved once.
func TestOrderNumbersNextDayReservedOnce(t *testing.T) {
	t.Parallel()
	res := countingReserver(t)
	rdb, prefix := testenv.Redis(t)
	o := newOrders(t, redisstore.New(rdb, prefix, 4), res, OrderConfig{Step: 1000})
	before, after := lastInstant(2026, 5, 1, time.UTC), time.Date(2026, 5, 2, 0, 0, 0, 1e6, time.UTC)
	for range 10 {
		o.Date(before)
		o.Date(after)
		time.Sleep(50 * time.Millisecond) // a raise under way is joined, not repeated: let it end
	}
	waitFor(t, func() bool { return res.calls.Load() >= 4 })
	// A new hash is fenced on its first raise: two reservations a shard.
	if n := res.calls.Load(); n > 8 {
		t.Errorf("%d reservations for the next day's 4 shards, want one raise each", n)
	}
}

// A plain raise's range PostgreSQL reserved whose recording in Redis
// failed is recorded by the next raise rather than another reserved: while
// Redis fails, grabs that find no number do not use up the shard's day
// range by range. (A fence's range is never kept: see raise.)
func TestOrderNumbersUnrecordedRangeIsKept(t *testing.T) {
	t.Parallel()
	res := countingReserver(t)
	rdb, prefix := testenv.Redis(t)
	s := redisstore.New(rdb, prefix, 4)
	var failing atomic.Bool
	rdb.(*redis.Client).AddHook(ceilingHook{on: &failing})
	newOrders(t, s, res, OrderConfig{Step: 3})
	now := midday()
	loadEnvelope(t, s, 1, 50, now)
	var u int
	for ; u < 4; u++ { // the day's first range fenced, the next raised
		if _, err := s.Grab(t.Context(), 1, fmt.Sprint("u", u), now); err != nil {
			t.Fatal(err)
		}
	}
	failing.Store(true)
	before, failed := res.calls.Load(), 0
	for range 20 {
		if _, err := s.Grab(t.Context(), 1, fmt.Sprint("u", u), now); err != nil {
			failed++
		}
		u++
	}
	if n := res.calls.Load() - before; failed < 15 || n > 2 {
		t.Errorf("%d ranges reserved while %d grabs failed to record one; want at least 15 failed and the first range kept (at most 2)", n, failed)
	}
	failing.Store(false)
	if _, err := s.Grab(t.Context(), 1, "late", now); err != nil {
		t.Errorf("grab once Redis records again = %v", err)
	}
}

// A fence whose call ran but whose answer was lost is not recorded again
// later: after the shard's hash is lost once more, that late record would
// move the counter back below numbers already answered.
func TestOrderNumbersLostFenceAnswerIsNotReused(t *testing.T) {
	t.Parallel()
	res := countingReserver(t)
	rdb, prefix := testenv.Redis(t)
	s := redisstore.New(rdb, prefix, 4)
	var lose atomic.Bool
	lose.Store(true)
	rdb.(*redis.Client).AddHook(ceilingHook{on: &lose, afterRun: true})
	newOrders(t, s, res, OrderConfig{Step: 100})
	now := midday()
	loadEnvelope(t, s, 1, 50, now)
	_, _ = s.Grab(t.Context(), 1, "first", now) // the day's fence runs; its answer is lost
	lose.Store(false)
	seen := map[string]bool{}
	grab := func(u string) {
		c, err := s.Grab(t.Context(), 1, u, now)
		if err != nil {
			t.Fatalf("grab %s: %v", u, err)
		}
		if seen[c.OrderNo] {
			t.Fatalf("order number %s answered twice", c.OrderNo)
		}
		seen[c.OrderNo] = true
	}
	for u := range 4 {
		grab(fmt.Sprint("a", u))
	}
	// The shard's hash is lost (its Redis keeps its identity).
	if err := rdb.Del(t.Context(), s.Keys().Orders(s.Keys().Shard(1), now.UTC().Format("20060102"))).Err(); err != nil {
		t.Fatal(err)
	}
	for u := range 4 {
		grab(fmt.Sprint("b", u))
	}
}

// ceilingHook fails order_ceiling.lua's calls (their one key is a shard's
// order-number hash) while on: unsent, or, with afterRun, once they ran (an
// answer lost), and then only fences (their fourth argument, the identity
// fenced for, not empty).
type ceilingHook struct {
	on       *atomic.Bool
	afterRun bool
}

func (h ceilingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h ceilingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h ceilingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		hit := h.on.Load() && len(a) > 6 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") &&
			fmt.Sprint(a[2]) == "1" && strings.Contains(fmt.Sprint(a[3]), ":order:")
		if hit && !h.afterRun {
			return failWith(cmd)
		}
		err := next(ctx, cmd)
		if hit && err == nil && fmt.Sprint(a[6]) != "" {
			return failWith(cmd)
		}
		return err
	}
}

func failWith(cmd redis.Cmder) error {
	err := errors.New("i/o timeout")
	cmd.SetErr(err)
	return err
}
