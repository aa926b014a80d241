package redisstore_test

import (
	"errors"
	"fmt"
	"sync"
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
		workers = 32
	)
	now := time.Now()
	byID, total := load(t, s, id, packets, now)

	type answer struct {
		claim redisstore.Claim
		err   error
	}
	first := make([]answer, users)
	second := make([]answer, users)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			// Each worker grabs for its users, then retries them all, so
			// retries interleave with other workers' first grabs.
			for pass, out := range [][]answer{first, second} {
				for u := w; u < users; u += workers {
					c, err := s.Grab(ctx, id, fmt.Sprintf("user:%d@x", u), now.Add(time.Duration(pass)*time.Millisecond))
					out[u] = answer{c, err}
				}
			}
		})
	}
	close(start)
	wg.Wait()

	winners := 0
	var sum int64
	owner := map[int64]int{}
	orders := map[string]int{}
	for u := range users {
		a, b := first[u], second[u]
		switch {
		case a.err == nil:
			winners++
			sum += a.claim.AmountCents
			if a.claim.Repeat {
				t.Errorf("user %d: first answer has Repeat set", u)
			}
			if amount, ok := byID[a.claim.PacketID]; !ok || amount != a.claim.AmountCents {
				t.Errorf("user %d: claim %+v is not a loaded packet", u, a.claim)
			}
			if prev, dup := owner[a.claim.PacketID]; dup {
				t.Errorf("packet %d granted to users %d and %d", a.claim.PacketID, prev, u)
			}
			owner[a.claim.PacketID] = u
			if prev, dup := orders[a.claim.OrderNo]; dup || len(a.claim.OrderNo) != 18 {
				t.Errorf("order number %q answered to users %d and %d (or not 8+10 digits)", a.claim.OrderNo, prev, u)
			}
			orders[a.claim.OrderNo] = u
			want := a.claim
			want.Repeat = true
			if b.err != nil || b.claim != want {
				t.Errorf("user %d: retry = %+v, %v; want %+v", u, b.claim, b.err, want)
			}
		case errors.Is(a.err, redisstore.ErrSoldOut):
			if !errors.Is(b.err, redisstore.ErrSoldOut) {
				t.Errorf("user %d: sold out, then %+v, %v", u, b.claim, b.err)
			}
		default:
			t.Errorf("user %d: grab error %v", u, a.err)
		}
	}
	if winners != packets || len(owner) != packets {
		t.Errorf("%d winners holding %d distinct packets, want %d", winners, len(owner), packets)
	}
	if sum != total {
		t.Errorf("granted %d cents, want the total %d", sum, total)
	}
	if numbers.Supplies() < packets/37 {
		t.Errorf("%d raises for %d grants 37 at a time", numbers.Supplies(), packets)
	}
	if n := llen(t, rdb, k.Consumed(k.Shard(id))); n != packets {
		t.Errorf("consumed holds %d claims, want %d", n, packets)
	}
	if n := llen(t, rdb, k.Pool(id)); n != 0 {
		t.Errorf("pool holds %d packets, want 0", n)
	}
	if n, _ := rdb.HLen(ctx, k.Claims(id)).Result(); n != packets {
		t.Errorf("claims hash holds %d, want %d", n, packets)
	}
	live, err := s.Live(ctx, id)
	if err != nil || live.GrabbedCents != total || live.Remaining != 0 {
		t.Errorf("Live = %+v, %v; want %d grabbed, 0 remaining", live, err, total)
	}
	// The queue agrees with the answers, packet by packet.
	queued := lrange(t, rdb, k.Consumed(k.Shard(id)))
	for _, raw := range queued {
		q, err := redisstore.ParseQueued(raw)
		if err != nil {
			t.Fatalf("ParseQueued(%q): %v", raw, err)
		}
		u, ok := owner[q.PacketID]
		if !ok || q.UserID != fmt.Sprintf("user:%d@x", u) || q.AmountCents != first[u].claim.AmountCents || q.EnvelopeID != id {
			t.Errorf("queued %q disagrees with the answers", raw)
		}
	}
}
