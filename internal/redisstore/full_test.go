package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// fullStore is a Store on a Redis of this test's own, and a function that
// makes that Redis full (maxmemory below what it holds, noeviction): it then
// refuses every command that may grow memory.
func fullStore(t *testing.T) (*redisstore.Store, *redis.Client, func()) {
	t.Helper()
	c, _ := testenv.PrivateRedis(t)
	fill := func() {
		if err := c.ConfigSet(t.Context(), "maxmemory-policy", "noeviction").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.ConfigSet(t.Context(), "maxmemory", "1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Set(t.Context(), "probe", "x", 0).Err(); err == nil || !redis.HasErrorPrefix(err, "OOM") {
			t.Fatalf("SET on the full Redis = %v, want OOM", err)
		}
	}
	return numbered(redisstore.New(c, "full", testShards)), c, fill
}

// A full Redis still closes an envelope (which frees its pool), suspends
// one (grants stop), and records order numbers PostgreSQL reserved (or
// each grab would reserve another range, and the shard's day run out); a
// grab it refuses took nothing.
func TestScriptsThatMustRunWhenRedisIsFull(t *testing.T) {
	t.Parallel()
	s, c, fill := fullStore(t)
	ctx := t.Context()
	k := s.Keys()
	now := time.Now()
	load(t, s, 1, 50, now)
	load(t, s, 2, 50, now)
	fill()

	if _, err := s.Grab(ctx, 1, "alice", now); err == nil || !redisstore.TookNothing(err) {
		t.Errorf("grab on the full Redis = %v; want a refusal that took nothing", err)
	}
	if n := c.LLen(ctx, k.Pool(1)).Val(); n != 50 {
		t.Errorf("pool after the refused grab holds %d, want 50", n)
	}
	if _, err := s.Close(ctx, 1, 50, time.Hour); err != nil {
		t.Errorf("close on the full Redis: %v", err)
	}
	if st := c.HGet(ctx, k.Meta(1), "status").Val(); st != "closed" || c.Exists(ctx, k.Pool(1)).Val() != 0 {
		t.Errorf("after the close: status %q, pool exists %d; want closed, dropped", st, c.Exists(ctx, k.Pool(1)).Val())
	}
	if _, err := s.Suspend(ctx, 2); err != nil {
		t.Errorf("suspend on the full Redis: %v", err)
	}
	if _, err := s.Suspend(ctx, 3); err != nil { // Redis holds nothing of it
		t.Errorf("suspend of an envelope Redis does not hold, on the full Redis: %v", err)
	}
	for id, want := range map[int64]string{2: "suspended", 3: "suspended"} {
		if st := c.HGet(ctx, k.Meta(id), "status").Val(); st != want {
			t.Errorf("envelope %d after the suspension: %q, want %q", id, st, want)
		}
	}
	// A shard's first range of a day (of a shard no grab asked numbers
	// for) fences this Redis's counter: the first call asks for it, the
	// second sets it.
	date, shard := now.UTC().Format("20060102"), (k.Shard(1)+1)%testShards
	var short *redisstore.OrderShortage
	if _, err := s.RaiseOrderCeiling(ctx, shard, date, 0, 1000, ""); !errors.As(err, &short) {
		t.Fatalf("first raise of the day = %v, want the shortage that names this Redis", err)
	}
	if _, err := s.RaiseOrderCeiling(ctx, shard, date, 0, 1000, short.Identity); err != nil {
		t.Errorf("order numbers raised on the full Redis: %v", err)
	}
	if n := c.HGet(ctx, k.Orders(shard, date), "ceiling").Val(); n != "1000" {
		t.Errorf("ceiling after the raise on the full Redis: %q, want 1000", n)
	}
}

// A full Redis still lets the repair give up an envelope that never loaded.
func TestGiveUpWhenRedisIsFull(t *testing.T) {
	t.Parallel()
	s, c, fill := fullStore(t)
	if err := c.Set(t.Context(), s.Keys().Epoch(s.Keys().Shard(7)), "e1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	fill()
	if wasLoaded, err := s.Fail(t.Context(), "e1", 7, 10, time.Now().Add(time.Hour), 1000, time.Hour); err != nil || wasLoaded {
		t.Fatalf("Fail on the full Redis = %v, %v; want the envelope given up", wasLoaded, err)
	}
	if st := c.HGet(t.Context(), s.Keys().Meta(7), "status").Val(); st != "failed" {
		t.Errorf("status after Fail on the full Redis = %q, want failed", st)
	}
}
