package redisstore_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
)

func queuedUsers(t *testing.T, raw []string) []string {
	t.Helper()
	users := make([]string, len(raw))
	for i, r := range raw {
		q, err := redisstore.ParseQueued(r)
		if err != nil {
			t.Fatalf("ParseQueued(%q): %v", r, err)
		}
		users[i] = q.UserID
	}
	return users
}

func TestTakeAck(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	const id = 21 // shard 1
	shard := k.Shard(id)
	now := time.Now()
	load(t, s, id, 10, now)
	users := grabInTurn(t, s, id, 10, now)
	wantPending(t, s, shard, 10)

	batch := takeOldest(t, s, rdb, shard, users[:4])
	wantPending(t, s, shard, 10)
	wantTakeRepeatsInflight(t, s, rdb, shard, batch)
	ackOnlyInflight(t, s, rdb, shard, batch)
	wantPending(t, s, shard, 6)

	batch, err := s.Take(ctx, shard, 4)
	if err != nil || !slices.Equal(queuedUsers(t, batch), users[4:8]) {
		t.Fatalf("second batch = %v, %v; want users %v", batch, err, users[4:8])
	}
	wantPending(t, s, shard, 6)
	if _, err := s.Ack(ctx, shard, batch, nil); err != nil {
		t.Fatal(err)
	}
	batch, err = s.Take(ctx, shard, 100)
	if err != nil || !slices.Equal(queuedUsers(t, batch), users[8:]) {
		t.Fatalf("third batch = %v, %v; want users %v", batch, err, users[8:])
	}
	if _, err := s.Ack(ctx, shard, batch, nil); err != nil {
		t.Fatal(err)
	}
	wantPending(t, s, shard, 0)
	batch, err = s.Take(ctx, shard, 100)
	if err != nil || batch == nil || len(batch) != 0 {
		t.Errorf("Take of a drained shard = %#v, %v; want an empty slice", batch, err)
	}
	// Ack with nothing in flight is harmless.
	if _, err := s.Ack(ctx, shard, batch, nil); err != nil {
		t.Errorf("Ack of nothing: %v", err)
	}
}

// grabInTurn has users u00, u01, ... grab from envelope id one millisecond
// apart, and returns them in the order they grabbed.
func grabInTurn(t *testing.T, s *redisstore.Store, id int64, n int, now time.Time) []string {
	t.Helper()
	users := make([]string, n)
	for i := range users {
		users[i] = fmt.Sprintf("u%02d", i)
		if _, err := s.Grab(t.Context(), id, users[i], now.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	return users
}

// wantPending checks that Pending counts n claims in shard and none in any
// other.
func wantPending(t *testing.T, s *redisstore.Store, shard int, n int64) {
	t.Helper()
	got, err := s.Pending(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != testShards {
		t.Fatalf("Pending has %d shards, want %d", len(got), testShards)
	}
	want := make([]int64, testShards)
	want[shard] = n
	if !slices.Equal(got, want) {
		t.Errorf("Pending = %v, want %v", got, want)
	}
}

// takeOldest takes a batch of 4 from a shard of 10 claims and checks that
// it holds the oldest claims (of want), moved from consumed to in flight.
func takeOldest(t *testing.T, s *redisstore.Store, rdb redis.UniversalClient, shard int, want []string) []string {
	t.Helper()
	k := s.Keys()
	batch, err := s.Take(t.Context(), shard, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := queuedUsers(t, batch); !slices.Equal(got, want) {
		t.Fatalf("first batch users %v, want the oldest %v", got, want)
	}
	if n := llen(t, rdb, k.Consumed(shard)); n != 6 {
		t.Errorf("consumed holds %d after take, want 6", n)
	}
	if got := lrange(t, rdb, k.Inflight(shard)); !slices.Equal(got, batch) {
		t.Errorf("inflight = %v, want the batch %v", got, batch)
	}
	return batch
}

// wantTakeRepeatsInflight checks that before Ack, Take hands out the same
// batch, whatever the size asked.
func wantTakeRepeatsInflight(t *testing.T, s *redisstore.Store, rdb redis.UniversalClient, shard int, batch []string) {
	t.Helper()
	for _, max := range []int{4, 1, 100} {
		again, err := s.Take(t.Context(), shard, max)
		if err != nil || !slices.Equal(again, batch) {
			t.Errorf("Take(max %d) before Ack = %v, %v; want the in-flight %v", max, again, err, batch)
		}
	}
	if n := llen(t, rdb, s.Keys().Consumed(shard)); n != 6 {
		t.Errorf("consumed holds %d after repeated takes, want 6", n)
	}
}

// ackOnlyInflight checks that an ack of another batch leaves the in-flight
// one alone, and that the ack of the in-flight batch removes it.
func ackOnlyInflight(t *testing.T, s *redisstore.Store, rdb redis.UniversalClient, shard int, batch []string) {
	t.Helper()
	ctx := t.Context()
	if acked, err := s.Ack(ctx, shard, batch[1:], []string{"refused"}); err != nil || acked {
		t.Fatalf("Ack of a different batch = %v, %v; want it refused", acked, err)
	}
	if exists(t, rdb, s.Keys().Rejected(shard)) {
		t.Errorf("a refused ack kept its rejected entries: %v", lrange(t, rdb, s.Keys().Rejected(shard)))
	}
	if acked, err := s.Ack(ctx, shard, batch, []string{"garbage", "1:2:x:4:u"}); err != nil || !acked {
		t.Fatalf("Ack = %v, %v", acked, err)
	}
	if exists(t, rdb, s.Keys().Inflight(shard)) {
		t.Errorf("inflight still exists after Ack")
	}
	// Acknowledged again (a retry after a lost reply): nothing kept twice.
	if acked, err := s.Ack(ctx, shard, batch, []string{"garbage", "1:2:x:4:u"}); err != nil || acked {
		t.Fatalf("second Ack = %v, %v; want it refused", acked, err)
	}
	if got := lrange(t, rdb, s.Keys().Rejected(shard)); !slices.Equal(got, []string{"garbage", "1:2:x:4:u"}) {
		t.Errorf("rejected = %v, want the acknowledged batch's two entries once", got)
	}
}

func TestTakeEmptyShard(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	for shard := range testShards {
		batch, err := s.Take(ctx, shard, 10)
		if err != nil || batch == nil || len(batch) != 0 {
			t.Errorf("Take(shard %d) = %#v, %v; want an empty slice", shard, batch, err)
		}
		if exists(t, rdb, s.Keys().Inflight(shard)) {
			t.Errorf("Take of an empty shard created its inflight list")
		}
	}
	p, err := s.Pending(ctx)
	if err != nil || !slices.Equal(p, make([]int64, testShards)) {
		t.Errorf("Pending = %v, %v", p, err)
	}
}

// TestTakeShardsIndependent checks that claims stay in their envelope's shard.
func TestTakeShardsIndependent(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	now := time.Now()
	for id := int64(100); id < 100+testShards; id++ {
		load(t, s, id, 3, now)
		for u := range int(id % testShards) {
			if _, err := s.Grab(ctx, id, fmt.Sprint("u", u), now); err != nil {
				t.Fatal(err)
			}
		}
	}
	p, err := s.Pending(ctx)
	if err != nil || !slices.Equal(p, []int64{0, 1, 2, 3}) {
		t.Fatalf("Pending = %v, %v; want [0 1 2 3]", p, err)
	}
	for shard := range testShards {
		batch, err := s.Take(ctx, shard, 10)
		if err != nil || len(batch) != shard {
			t.Fatalf("Take(shard %d) = %v, %v; want %d claims", shard, batch, err, shard)
		}
		for _, raw := range batch {
			q, err := redisstore.ParseQueued(raw)
			if err != nil || s.Keys().Shard(q.EnvelopeID) != shard {
				t.Errorf("shard %d handed out %q (%v)", shard, raw, err)
			}
		}
	}
}

func TestTakeLargeBatch(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	const shard, queued, max = 2, 2600, 2500
	k := s.Keys()
	// Queue claims as grab.lua does: LPUSH, so the oldest is at the tail.
	all := make([]string, queued)
	pipe := rdb.Pipeline()
	for i := range all {
		all[i] = fmt.Sprintf("6:%d:1:%d:user-%d", 10_000+i, 1_700_000_000_000+i, i)
		pipe.LPush(ctx, k.Consumed(shard), all[i])
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	batch, err := s.Take(ctx, shard, max)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(batch, all[:max]) {
		t.Fatalf("batch of %d (first %q), want the oldest %d in order", len(batch), first(batch), max)
	}
	if got := lrange(t, rdb, k.Inflight(shard)); !slices.Equal(got, all[:max]) {
		t.Errorf("inflight holds %d claims, not the batch in order", len(got))
	}
	if n := llen(t, rdb, k.Consumed(shard)); n != queued-max {
		t.Errorf("consumed holds %d, want %d", n, queued-max)
	}
	again, err := s.Take(ctx, shard, max)
	if err != nil || !slices.Equal(again, batch) {
		t.Errorf("re-take of a large in-flight batch differs (%d claims, %v)", len(again), err)
	}
	if acked, err := s.Ack(ctx, shard, batch, nil); err != nil || !acked {
		t.Fatal(acked, err)
	}
	rest, err := s.Take(ctx, shard, max)
	if err != nil || !slices.Equal(rest, all[max:]) {
		t.Errorf("rest = %d claims, %v; want %d", len(rest), err, queued-max)
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// An ack keeps any number of rejected entries: a batch may be all
// malformed, more entries than Lua hands to one command.
func TestAckKeepsManyRejected(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	const shard = 2
	garbage := make([]any, 20000)
	want := make([]string, len(garbage))
	for i := range garbage {
		want[i] = fmt.Sprintf("garbage-%d", i)
		garbage[i] = want[i]
	}
	if err := rdb.RPush(ctx, s.Keys().Consumed(shard), garbage...).Err(); err != nil {
		t.Fatal(err)
	}
	batch, err := s.Take(ctx, shard, len(garbage))
	if err != nil || len(batch) != len(garbage) {
		t.Fatalf("Take = %d entries, %v", len(batch), err)
	}
	if acked, err := s.Ack(ctx, shard, batch, batch); err != nil || !acked {
		t.Fatalf("Ack of %d rejected entries = %v, %v", len(batch), acked, err)
	}
	got := lrange(t, rdb, s.Keys().Rejected(shard))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("rejected holds %d entries, want the %d taken", len(got), len(want))
	}
}

// Suspending a closed envelope keeps its meta and claims for good: closed,
// they had a lifetime, and an operator decides the suspended envelope from
// them (who was told they got a packet).
func TestSuspendKeepsAClosedEnvelopesClaims(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	const id, n = 31, 6
	now := time.Now()
	load(t, s, id, n, now)
	grabInTurn(t, s, id, 3, now)
	if _, err := s.Close(ctx, id, n, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Suspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	k := s.Keys()
	if ttl := rdb.PTTL(ctx, k.Meta(id)).Val(); ttl != -1 {
		t.Errorf("the meta's lifetime after the suspension = %s, want none (kept)", ttl)
	}
	for _, key := range k.ClaimBucketKeys(id, n) {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl != -1 && ttl != -2 { // -2: a bucket no claim fell in
			t.Errorf("%s still has a lifetime of %s after the suspension", key, ttl)
		}
	}
	if live, err := s.Live(ctx, id); err != nil || live.Status != redisstore.MetaSuspended || live.Claims != 3 {
		t.Errorf("live state after the suspension = %+v, %v; want suspended with 3 claims", live, err)
	}
}
