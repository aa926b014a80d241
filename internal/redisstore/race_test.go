package redisstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
)

// answer is one grab's outcome.
type answer struct {
	claim redisstore.Claim
	err   error
}

// race has users grab each of the loaded envelopes twice from 32 workers:
// every worker grabs for its users, then retries them all, so retries
// interleave with other workers' first grabs. It returns each envelope's
// first and second answers, by user.
func race(t *testing.T, s *redisstore.Store, envelopes []int64, users int, now time.Time) (first, second map[int64][]answer) {
	const workers = 32
	first, second = map[int64][]answer{}, map[int64][]answer{}
	for _, id := range envelopes {
		first[id], second[id] = make([]answer, users), make([]answer, users)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for pass, out := range []map[int64][]answer{first, second} {
				for u := w; u < users; u += workers {
					for _, id := range envelopes {
						c, err := s.Grab(t.Context(), id, raceUser(u), now.Add(time.Duration(pass)*time.Millisecond))
						out[id][u] = answer{c, err}
					}
				}
			}
		})
	}
	close(start)
	wg.Wait()
	return first, second
}

func raceUser(u int) string { return fmt.Sprintf("user:%d@x", u) }

// checkRace checks one envelope's answers: exactly its packets granted,
// each once and as loaded (byID: amount by packet id), summing to total,
// every retry the first claim again or sold out again; its pool empty and
// its live figures all grabbed. It returns the winner of each packet.
func checkRace(t *testing.T, s *redisstore.Store, rdb redis.UniversalClient, id int64, first, second []answer, byID map[int64]int64, total int64) map[int64]int {
	t.Helper()
	owner := map[int64]int{}
	var sum int64
	for u := range first {
		a, b := first[u], second[u]
		switch {
		case a.err == nil && !a.claim.Repeat:
			if amount, ok := byID[a.claim.PacketID]; !ok || amount != a.claim.AmountCents {
				t.Fatalf("envelope %d user %d: claim %+v is not a loaded packet", id, u, a.claim)
			}
			if prev, dup := owner[a.claim.PacketID]; dup {
				t.Fatalf("envelope %d: packet %d granted to users %d and %d", id, a.claim.PacketID, prev, u)
			}
			owner[a.claim.PacketID] = u
			sum += a.claim.AmountCents
			want := a.claim
			want.Repeat = true
			if b.err != nil || b.claim != want {
				t.Fatalf("envelope %d user %d: retry = %+v, %v; want %+v", id, u, b.claim, b.err, want)
			}
		case errors.Is(a.err, redisstore.ErrSoldOut):
			if !errors.Is(b.err, redisstore.ErrSoldOut) {
				t.Fatalf("envelope %d user %d: sold out, then %+v, %v", id, u, b.claim, b.err)
			}
		default:
			t.Fatalf("envelope %d user %d: first grab %+v, %v", id, u, a.claim, a.err)
		}
	}
	if len(owner) != len(byID) || sum != total {
		t.Fatalf("envelope %d: %d packets granted holding %d cents; want %d holding %d", id, len(owner), sum, len(byID), total)
	}
	if n := llen(t, rdb, s.Keys().Pool(id)); n != 0 {
		t.Fatalf("envelope %d: pool holds %d packets, want 0", id, n)
	}
	live, err := s.Live(t.Context(), id)
	if err != nil || live.GrabbedCents != total || live.Remaining != 0 {
		t.Fatalf("envelope %d: Live = %+v, %v; want %d grabbed, 0 remaining", id, live, err, total)
	}
	return owner
}
