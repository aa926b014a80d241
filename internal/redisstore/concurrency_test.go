package redisstore_test

import (
	"testing"
	"time"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// TestGrabConcurrent races 2000 users, each grabbing twice, for 500 packets,
// with one script call per grab and with grabs coalesced into shared calls;
// order numbers come 37 at a time, so grabs often wait for a raise and
// raises race each other. Every grant has its own order number.
func TestGrabConcurrent(t *testing.T) {
	t.Parallel()
	t.Run("one call per grab", func(t *testing.T) {
		t.Parallel()
		testGrabConcurrent(t, func(*redisstore.Store) {})
	})
	t.Run("coalesced", func(t *testing.T) {
		t.Parallel()
		testGrabConcurrent(t, func(s *redisstore.Store) { t.Cleanup(s.Coalesce(2, 16)) })
	})
}

func testGrabConcurrent(t *testing.T, setup func(*redisstore.Store)) {
	rdb, prefix := testenv.Redis(t)
	s := redisstore.New(rdb, prefix, testShards)
	numbers := redisstore.NumberInMemory(s, 10, 37, time.UTC)
	setup(s)
	ctx := t.Context()
	k := s.Keys()
	const (
		id      = 31
		packets = 500
		users   = 2000
	)
	now := time.Now()
	byID, total := load(t, s, id, packets, now)
	firsts, seconds := race(t, s, []int64{id}, users, now)
	first := firsts[id]
	owner := checkRace(t, s, rdb, id, first, seconds[id], byID, total)

	// Every grant has its own order number, of the shard's sequence.
	orders := map[string]int64{}
	for p, u := range owner {
		no := first[u].claim.OrderNo
		if prev, dup := orders[no]; dup || len(no) != 18 {
			t.Errorf("order number %q answered for packets %d and %d (or not 8+10 digits)", no, prev, p)
		}
		orders[no] = p
	}
	if numbers.Supplies() < packets/37 {
		t.Errorf("%d raises for %d grants 37 at a time", numbers.Supplies(), packets)
	}
	if n := llen(t, rdb, k.Consumed(k.Shard(id))); n != packets {
		t.Errorf("consumed holds %d claims, want %d", n, packets)
	}
	if n := len(redisstore.ClaimsOf(ctx, s, id)); n != packets {
		t.Errorf("claims hash holds %d, want %d", n, packets)
	}
	// The queue agrees with the answers, packet by packet.
	for _, raw := range lrange(t, rdb, k.Consumed(k.Shard(id))) {
		q, err := redisstore.ParseQueued(raw)
		if err != nil {
			t.Fatalf("ParseQueued(%q): %v", raw, err)
		}
		u, ok := owner[q.PacketID]
		if !ok || q.UserID != raceUser(u) || q.AmountCents != first[u].claim.AmountCents || q.EnvelopeID != id {
			t.Errorf("queued %q disagrees with the answers", raw)
		}
	}
}
