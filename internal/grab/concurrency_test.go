package grab_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/envelope"
	"redpacket/internal/flush"
	"redpacket/internal/grab"
	"redpacket/internal/testenv/stack"
)

// One envelope of 1,000 packets, 5,000 users each trying twice from 64
// goroutines (see concurrentGrabsMatchPostgres).
func TestConcurrentGrabsMatchPostgres(t *testing.T) {
	t.Parallel()
	concurrentGrabsMatchPostgres(t, stack.New(t), rush{envelopes: 1, packets: 1000, users: 5000, total: 123457})
}

// The same on a Redis Cluster: envelopes on several shards, and so on
// several masters, every user trying each of them twice.
func TestClusterConcurrentGrabsMatchPostgres(t *testing.T) {
	t.Parallel()
	s := stack.NewCluster(t)
	concurrentGrabsMatchPostgres(t, s, rush{envelopes: 4, packets: 300, users: 1500, total: 54321, cluster: true})
}

// rush is the shape of one concurrency test.
type rush struct {
	envelopes, packets, users int
	total                     int64
	cluster                   bool // log the masters the envelopes landed on
}

const rushWorkers = 64

// concurrentGrabsMatchPostgres creates r.envelopes envelopes and has
// r.users users try each twice from 64 goroutines. Per envelope: exactly
// r.packets winners, no packet paid twice, every repeat identical to the
// first answer, amounts summing to the total; after a flush PostgreSQL holds
// exactly the answers given, every envelope is sold out and no claim
// conflicted.
func concurrentGrabsMatchPostgres(t *testing.T, s *stack.Stack, r rush) {
	ctx := t.Context()
	es := createRush(t, s, r)
	// first[i][u] is user u's first answer for envelope i; nil when refused.
	first := make([][]*grab.Claim, len(es))
	for i := range first {
		first[i] = make([]*grab.Claim, r.users)
	}
	var mu sync.Mutex
	var failures []string
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range rushWorkers {
		wg.Go(func() {
			for u := range jobs {
				for try := range 2 {
					for i, e := range es {
						if msg := grabOnce(ctx, s, e.ID, u, try, first[i]); msg != "" {
							mu.Lock()
							failures = append(failures, msg)
							mu.Unlock()
						}
					}
				}
			}
		})
	}
	for u := range r.users {
		jobs <- u
	}
	close(jobs)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d bad answers, first: %s", len(failures), failures[0])
	}
	winners := make([]map[string]grab.Claim, len(es))
	for i, e := range es {
		winners[i] = checkWinners(t, e.ID, first[i], r)
	}
	if err := flush.New(s.Redis, s.PG, flush.Config{BatchSize: 250}, nil).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		checkLedger(t, s, e.ID, winners[i], r)
	}
	var conflicts int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM claim_conflicts`).Scan(&conflicts); err != nil || conflicts != 0 {
		t.Fatalf("%d claim conflicts (%v); want none", conflicts, err)
	}
}

func createRush(t *testing.T, s *stack.Stack, r rush) []grab.Envelope {
	var es []grab.Envelope
	masters := map[string]bool{}
	for range r.envelopes {
		e, err := s.Svc.Create(t.Context(), envelope.CreateRequest{SenderID: "sender", TotalCents: r.total, Count: int64(r.packets)})
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
		if r.cluster {
			node, err := s.RDB.(*redis.ClusterClient).MasterForKey(t.Context(), s.Redis.Keys().Meta(e.ID))
			if err != nil {
				t.Fatal(err)
			}
			masters[node.Options().Addr] = true
		}
	}
	if r.cluster {
		t.Logf("%d envelopes on %d masters", len(es), len(masters))
	}
	return es
}

// checkWinners checks the first answers of one envelope: no packet twice,
// r.packets winners holding r.total; it returns the winners by user.
func checkWinners(t *testing.T, id int64, first []*grab.Claim, r rush) map[string]grab.Claim {
	winners := map[string]grab.Claim{}
	byPacket := map[int64]string{}
	var sum int64
	for u, c := range first {
		if c == nil {
			continue
		}
		user := userID(u)
		if other, dup := byPacket[c.PacketID]; dup {
			t.Fatalf("envelope %d: packet %d paid to %s and %s", id, c.PacketID, other, user)
		}
		byPacket[c.PacketID] = user
		winners[user] = *c
		sum += c.AmountCents
	}
	if len(winners) != r.packets || sum != r.total {
		t.Fatalf("envelope %d: %d winners holding %d cents; want %d holding %d", id, len(winners), sum, r.packets, r.total)
	}
	return winners
}

// checkLedger checks that PostgreSQL holds exactly the winners' claims of
// one envelope, and that it is sold out with every cent claimed.
func checkLedger(t *testing.T, s *stack.Stack, id int64, winners map[string]grab.Claim, r rush) {
	ctx := t.Context()
	rows, err := s.Pool.Query(ctx, `SELECT id, amount_cents, claimed_by, claimed_at, order_no FROM packets
		WHERE envelope_id = $1 AND claimed_by IS NOT NULL`, id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var pid, amount int64
		var user string
		var at time.Time
		var orderNo *string
		if err := rows.Scan(&pid, &amount, &user, &at, &orderNo); err != nil {
			t.Fatal(err)
		}
		c, ok := winners[user]
		if !ok || c.PacketID != pid || c.AmountCents != amount || !at.Equal(c.GrabbedAt) ||
			orderNo == nil || *orderNo != c.OrderNo {
			t.Fatalf("postgres has packet %d (%d cents, %v) for %s; the answer was %+v", pid, amount, at, user, c)
		}
		n++
	}
	if rows.Err() != nil || n != r.packets {
		t.Fatalf("envelope %d: postgres holds %d claims (%v); want %d", id, n, rows.Err(), r.packets)
	}
	e := s.Envelope(t, id)
	if e.Status != envelope.StatusSoldOut || e.ClaimedCents != r.total {
		t.Fatalf("envelope %d %s with %d claimed cents; want sold_out with %d", id, e.Status, e.ClaimedCents, r.total)
	}
}

func userID(u int) string { return fmt.Sprintf("user-%d", u) }

// grabOnce grabs for user u and checks the answer against the user's first
// one; it returns a description of anything wrong.
func grabOnce(ctx context.Context, s *stack.Stack, id int64, u, try int, first []*grab.Claim) string {
	c, err := s.Svc.Grab(ctx, id, userID(u))
	switch {
	case try == 0 && err == nil && !c.Repeat:
		first[u] = &c
	case try == 0 && err != nil:
		if !errors.Is(err, grab.ErrSoldOut) {
			return fmt.Sprintf("user %d: %v", u, err)
		}
	case try == 1 && first[u] == nil:
		if err == nil {
			return fmt.Sprintf("user %d refused, then granted %+v", u, c)
		}
	case try == 1:
		want := *first[u]
		want.Repeat = true
		if err != nil || c != want {
			return fmt.Sprintf("user %d repeat: %+v, %v; want %+v", u, c, err, want)
		}
	default:
		return fmt.Sprintf("user %d try %d: %+v, %v", u, try, c, err)
	}
	return ""
}
