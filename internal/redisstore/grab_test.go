package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"redpacket/internal/redisstore"
)

func TestGrabNotLoaded(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	_, err := s.Grab(ctx, 5, "alice", time.Now())
	if !errors.Is(err, redisstore.ErrNotLoaded) {
		t.Fatalf("grab of unknown envelope = %v, want ErrNotLoaded", err)
	}
	k := s.Keys()
	for _, key := range []string{k.Meta(5), k.Pool(5), k.Claims(5), k.UserClaims(5, 1, "alice"), k.Consumed(k.Shard(5))} {
		if exists(t, rdb, key) {
			t.Errorf("%s created by a refused grab", key)
		}
	}
}

// A grab of an id no envelope can have (past 2^53 - 1, which Lua and JSON
// hold exactly) is not found, and the grabs sent in the same script call
// as it are answered as if it had not been there.
func TestGrabOfAnImpossibleIDSparesItsNeighbours(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	now := time.Now()
	load(t, s, 1, 500, now)
	t.Cleanup(s.Coalesce(1, 64))
	errs := make(chan error, 400)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if _, err := s.Grab(ctx, 1<<53+int64(testShards)+1, fmt.Sprintf("x%d", i), now); !errors.Is(err, redisstore.ErrNotLoaded) {
				errs <- fmt.Errorf("grab of envelope 2^53+%d = %v, want ErrNotLoaded", testShards+1, err)
			}
		})
		wg.Go(func() {
			if _, err := s.Grab(ctx, 1, fmt.Sprintf("u%d", i), now); err != nil {
				errs <- fmt.Errorf("grab of envelope 1 beside it = %w", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A grab whose caller has already gone is not sent: it takes no packet
// that no one would be told about.
func TestGrabOfAGoneCallerIsNotSent(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	now := time.Now()
	load(t, s, 1, 5, now)
	for _, coalesced := range []bool{false, true} {
		if coalesced {
			t.Cleanup(s.Coalesce(1, 8))
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		user := fmt.Sprintf("gone-%v", coalesced)
		if _, err := s.Grab(ctx, 1, user, now); !errors.Is(err, context.Canceled) || !redisstore.TookNothing(err) {
			t.Errorf("grab of a gone caller (coalesced %v) = %v, want context.Canceled, nothing taken", coalesced, err)
		}
		// The next grab is answered after anything queued before it.
		if _, err := s.Grab(t.Context(), 1, "next-"+user, now); err != nil {
			t.Fatal(err)
		}
		if c, err := s.Grab(t.Context(), 1, user, now); err != nil || c.Repeat {
			t.Errorf("the gone caller's user grabs again (coalesced %v): %+v, %v; want a first packet", coalesced, c, err)
		}
	}
}

func TestGrabGrantedAndRepeat(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	const id = 9
	now := time.Now()
	packets, _ := load(t, s, id, 5, now)

	first, err := s.Grab(ctx, id, "alice", now)
	if err != nil {
		t.Fatalf("grab: %v", err)
	}
	if first.Repeat {
		t.Errorf("first grab has Repeat set")
	}
	amount, ok := packets[first.PacketID]
	if !ok || amount != first.AmountCents {
		t.Fatalf("claim %+v: not a loaded packet (amount %d, known %v)", first, amount, ok)
	}
	if !first.GrabbedAt.Equal(ms(now)) {
		t.Errorf("GrabbedAt = %v, want %v", first.GrabbedAt, ms(now))
	}
	pool := lrange(t, rdb, k.Pool(id))
	if len(pool) != 4 {
		t.Fatalf("pool length %d after one grab, want 4", len(pool))
	}
	for _, p := range pool {
		if p == fmt.Sprintf("%d:%d", first.PacketID, first.AmountCents) {
			t.Errorf("granted packet still in the pool")
		}
	}

	// The same user again, later: the same claim, nothing popped or queued.
	again, err := s.Grab(ctx, id, "alice", now.Add(3*time.Second))
	if err != nil {
		t.Fatalf("repeat grab: %v", err)
	}
	want := first
	want.Repeat = true
	if again != want {
		t.Errorf("repeat = %+v, want %+v", again, want)
	}
	if n := llen(t, rdb, k.Pool(id)); n != 4 {
		t.Errorf("pool length %d after repeat, want 4", n)
	}
	if n := llen(t, rdb, k.Consumed(k.Shard(id))); n != 1 {
		t.Errorf("consumed holds %d claims, want 1", n)
	}
	// Another user gets another packet.
	other, err := s.Grab(ctx, id, "bob", now)
	if err != nil || other.PacketID == first.PacketID || other.Repeat {
		t.Errorf("bob's grab = %+v, %v; want a new, different packet", other, err)
	}
}

func TestGrabClosedStatus(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	const id = 10
	now := time.Now()
	load(t, s, id, 5, now)
	held, err := s.Grab(ctx, id, "holder", now)
	if err != nil {
		t.Fatal(err)
	}
	for status, want := range map[string]error{
		"closed": redisstore.ErrClosed, "failed": redisstore.ErrClosed, "loading": redisstore.ErrClosed,
		"": redisstore.ErrClosed, "suspended": redisstore.ErrSuspended,
	} {
		if err := rdb.HSet(ctx, s.Keys().Meta(id), "status", status).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Grab(ctx, id, "late", now); !errors.Is(err, want) {
			t.Errorf("status %q: grab = %v, want %v", status, err, want)
		}
		c, err := s.Grab(ctx, id, "holder", now)
		if err != nil || !c.Repeat || c.PacketID != held.PacketID {
			t.Errorf("status %q: holder's repeat = %+v, %v; want their packet %d", status, c, err, held.PacketID)
		}
	}
	if n := llen(t, rdb, s.Keys().Pool(id)); n != 4 {
		t.Errorf("pool length %d, want 4: a closed envelope gave a packet", n)
	}
	if err := rdb.HSet(ctx, s.Keys().Meta(id), "status", "open").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Grab(ctx, id, "late", now); err != nil {
		t.Errorf("grab after reopening = %v", err)
	}
}

func TestGrabExpiry(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	const id = 11
	expires := time.UnixMilli(1_800_000_000_000)
	ps, total := makePackets(1, 3)
	if _, err := s.LoadEnvelope(ctx, id, expires, total, ps); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Grab(ctx, id, "late", expires.Add(time.Millisecond)); !errors.Is(err, redisstore.ErrClosed) {
		t.Errorf("grab 1ms after expiry = %v, want ErrClosed", err)
	}
	if _, err := s.Grab(ctx, id, "late", expires.Add(time.Hour)); !errors.Is(err, redisstore.ErrClosed) {
		t.Errorf("grab an hour after expiry = %v, want ErrClosed", err)
	}
	c, err := s.Grab(ctx, id, "ontime", expires)
	if err != nil {
		t.Fatalf("grab at expiry = %v, want granted", err)
	}
	if !c.GrabbedAt.Equal(expires) {
		t.Errorf("GrabbedAt = %v, want %v", c.GrabbedAt, expires)
	}
	again, err := s.Grab(ctx, id, "ontime", expires.Add(time.Hour))
	if err != nil || !again.Repeat || again.PacketID != c.PacketID || !again.GrabbedAt.Equal(c.GrabbedAt) {
		t.Errorf("holder's repeat after expiry = %+v, %v; want %+v", again, err, c)
	}
	if _, err := s.Grab(ctx, id, "early", expires.Add(-time.Second)); err != nil {
		t.Errorf("grab before expiry = %v", err)
	}
}

func TestGrabSoldOut(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	const id = 12
	now := time.Now()
	packets, total := load(t, s, id, 2, now)
	a, errA := s.Grab(ctx, id, "a", now)
	b, errB := s.Grab(ctx, id, "b", now)
	if errA != nil || errB != nil || a.PacketID == b.PacketID {
		t.Fatalf("grabs = %+v %v, %+v %v", a, errA, b, errB)
	}
	if _, ok := packets[a.PacketID]; !ok {
		t.Errorf("unknown packet %d", a.PacketID)
	}
	if _, err := s.Grab(ctx, id, "c", now); !errors.Is(err, redisstore.ErrSoldOut) {
		t.Errorf("grab of an empty pool = %v, want ErrSoldOut", err)
	}
	if _, err := s.Grab(ctx, id, "c", now); !errors.Is(err, redisstore.ErrSoldOut) {
		t.Errorf("second grab of an empty pool = %v, want ErrSoldOut", err)
	}
	for _, held := range []redisstore.Claim{a, b} {
		user := map[int64]string{a.PacketID: "a", b.PacketID: "b"}[held.PacketID]
		c, err := s.Grab(ctx, id, user, now.Add(time.Second))
		held.Repeat = true
		if err != nil || c != held {
			t.Errorf("%s's repeat after sold out = %+v, %v; want %+v", user, c, err, held)
		}
	}
	if n := llen(t, rdb, k.Consumed(k.Shard(id))); n != 2 {
		t.Errorf("consumed holds %d, want 2", n)
	}
	if n := len(redisstore.ClaimsOf(ctx, s, id)); n != 2 {
		t.Errorf("claims hash holds %d, want 2", n)
	}
	live, err := s.Live(ctx, id)
	if err != nil || live.Remaining != 0 || live.GrabbedCents != total {
		t.Errorf("Live = %+v, %v; want 0 remaining, %d grabbed", live, err, total)
	}
}

func TestGrabUserIDsRoundTrip(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	const id = 13
	now := time.UnixMilli(1_700_000_000_456)
	ps, total := makePackets(1, 10)
	if _, err := s.LoadEnvelope(ctx, id, now.Add(time.Hour), total, ps); err != nil {
		t.Fatal(err)
	}
	users := []string{"a:b", "x@y.z", "wx:123@corp:9", ":lead", "trail:", "::", "名字:@", "1:2:3:4:5"}
	got := map[string]redisstore.Claim{}
	for _, u := range users {
		c, err := s.Grab(ctx, id, u, now)
		if err != nil {
			t.Fatalf("grab by %q: %v", u, err)
		}
		got[u] = c
		// The repeat is found under the same id.
		if r, err := s.Grab(ctx, id, u, now); err != nil || !r.Repeat || r.PacketID != c.PacketID || r.OrderNo != c.OrderNo {
			t.Errorf("repeat by %q = %+v, %v", u, r, err)
		}
	}
	queued := lrange(t, rdb, k.Consumed(k.Shard(id)))
	if len(queued) != len(users) {
		t.Fatalf("consumed holds %d, want %d", len(queued), len(users))
	}
	seen := map[string]bool{}
	for _, raw := range queued {
		q, err := redisstore.ParseQueued(raw)
		if err != nil {
			t.Fatalf("ParseQueued(%q): %v", raw, err)
		}
		c, ok := got[q.UserID]
		if !ok || seen[q.UserID] {
			t.Fatalf("queued claim %q: user %q unknown or repeated", raw, q.UserID)
		}
		seen[q.UserID] = true
		want := redisstore.QueuedClaim{EnvelopeID: id, PacketID: c.PacketID, AmountCents: c.AmountCents,
			UserID: q.UserID, GrabbedAt: ms(now), OrderNo: c.OrderNo}
		if q != want || c.OrderNo == "" {
			t.Errorf("ParseQueued(%q) = %+v, want %+v", raw, q, want)
		}
	}
}

func TestGrabbedCentsAndLive(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	const id = 14
	now := time.Now()
	packets, total := load(t, s, id, 20, now)
	var sum int64
	for u := range 13 {
		c, err := s.Grab(ctx, id, "u"+strconv.Itoa(u), now)
		if err != nil {
			t.Fatal(err)
		}
		if packets[c.PacketID] != c.AmountCents {
			t.Fatalf("claim %+v: amount differs from the loaded %d", c, packets[c.PacketID])
		}
		sum += c.AmountCents
		// A repeat adds nothing.
		if _, err := s.Grab(ctx, id, "u"+strconv.Itoa(u), now); err != nil {
			t.Fatal(err)
		}
	}
	if sum == 0 || sum == total {
		t.Fatalf("bad fixture: sum %d of total %d", sum, total)
	}
	got, err := rdb.HGet(ctx, s.Keys().Meta(id), "grabbed_cents").Int64()
	if err != nil || got != sum {
		t.Errorf("meta grabbed_cents = %d, %v; want %d", got, err, sum)
	}
	live, err := s.Live(ctx, id)
	want := redisstore.Live{Loaded: true, Status: "open", Remaining: 7, Claims: 13, GrabbedCents: sum}
	if err != nil || live != want {
		t.Errorf("Live = %+v, %v; want %+v", live, err, want)
	}
	if err := rdb.HSet(ctx, s.Keys().Meta(id), "status", "closed").Err(); err != nil {
		t.Fatal(err)
	}
	if live, err := s.Live(ctx, id); err != nil || live.Status != "closed" {
		t.Errorf("Live after close = %+v, %v", live, err)
	}
}

func TestLiveUnknown(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	live, err := s.Live(t.Context(), 404)
	if err != nil || live != (redisstore.Live{}) {
		t.Errorf("Live(unknown) = %+v, %v; want zero Live, nil", live, err)
	}
}

// A grab sent without a reservation of the user's limits takes nothing: it
// is told to come back reserved while there is a packet to take, and gets
// the answers a reserved grab would once there is none: a holder's repeat,
// sold out, closed.
func TestGrabUnreserved(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	const id = 14
	now := time.Now()
	_, total := load(t, s, id, 2, now)
	for range 2 {
		if c, err := s.GrabUnreserved(ctx, id, "a", "", now); !errors.Is(err, redisstore.ErrUnreserved) {
			t.Fatalf("unreserved grab with packets left = %+v, %v; want ErrUnreserved", c, err)
		}
	}
	live, err := s.Live(ctx, id)
	if err != nil || live.Remaining != 2 || live.GrabbedCents != 0 {
		t.Errorf("after unreserved grabs: Live = %+v, %v; want nothing taken", live, err)
	}
	if n := llen(t, rdb, k.Consumed(k.Shard(id))); n != 0 {
		t.Errorf("unreserved grabs queued %d claims", n)
	}
	a, errA := s.Grab(ctx, id, "a", now)
	b, errB := s.Grab(ctx, id, "b", now)
	if errA != nil || errB != nil {
		t.Fatalf("reserved grabs: %v, %v", errA, errB)
	}
	c, err := s.GrabUnreserved(ctx, id, "a", "", now)
	a.Repeat = true
	if err != nil || c != a {
		t.Errorf("holder's unreserved grab = %+v, %v; want the repeat %+v", c, err, a)
	}
	if _, err := s.GrabUnreserved(ctx, id, "c", "", now); !errors.Is(err, redisstore.ErrSoldOut) {
		t.Errorf("unreserved grab of a sold-out envelope = %v, want ErrSoldOut", err)
	}
	if live, err := s.Live(ctx, id); err != nil || live.GrabbedCents != total || b.Repeat {
		t.Errorf("Live = %+v, %v; want %d grabbed by a and b", live, err, total)
	}

	const late = 15
	load(t, s, late, 2, now)
	if _, err := s.GrabUnreserved(ctx, late, "a", "", now.Add(2*time.Hour)); !errors.Is(err, redisstore.ErrClosed) {
		t.Errorf("unreserved grab after the expiry = %v, want ErrClosed", err)
	}
}
