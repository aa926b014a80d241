package grab_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"redpacket/internal/envelope"
	"redpacket/internal/flush"
	"redpacket/internal/grab"
	"redpacket/internal/redisstore"
	"redpacket/internal/testenv/stack"
)

// One envelope of 1,000 packets, 5,000 users each trying twice from 64
// goroutines: exactly 1,000 winners, nobody twice, every repeat identical to
// the first answer, amounts summing to the total; after a flush PostgreSQL
// holds exactly the answers given.
func TestConcurrentGrabsMatchPostgres(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := context.Background()
	const packets, users, workers, total = 1000, 5000, 64, 123457
	e, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "sender", TotalCents: total, Count: packets})
	if err != nil {
		t.Fatal(err)
	}

	first := make([]*redisstore.Claim, users) // first answer per user; nil when refused
	var mu sync.Mutex
	var failures []string
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for u := range jobs {
				for try := range 2 {
					if msg := grabOnce(ctx, s, e.ID, u, try, first); msg != "" {
						mu.Lock()
						failures = append(failures, msg)
						mu.Unlock()
					}
				}
			}
		})
	}
	for u := range users {
		jobs <- u
	}
	close(jobs)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d bad answers, first: %s", len(failures), failures[0])
	}

	winners := map[string]redisstore.Claim{}
	byPacket := map[int64]string{}
	var sum int64
	for u, c := range first {
		if c == nil {
			continue
		}
		user := userID(u)
		if other, dup := byPacket[c.PacketID]; dup {
			t.Fatalf("packet %d paid to %s and %s", c.PacketID, other, user)
		}
		byPacket[c.PacketID] = user
		winners[user] = *c
		sum += c.AmountCents
	}
	if len(winners) != packets || sum != total {
		t.Fatalf("%d winners holding %d cents; want %d holding %d", len(winners), sum, packets, total)
	}

	f := flush.New(s.Redis, s.PG, flush.Config{BatchSize: 300}, nil)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Pool.Query(ctx, `SELECT id, amount_cents, claimed_by, claimed_at, order_no FROM packets
		WHERE envelope_id = $1 AND claimed_by IS NOT NULL`, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for rows.Next() {
		var id, amount int64
		var user string
		var at time.Time
		var orderNo *string
		if err := rows.Scan(&id, &amount, &user, &at, &orderNo); err != nil {
			t.Fatal(err)
		}
		c, ok := winners[user]
		if !ok || c.PacketID != id || c.AmountCents != amount || !at.Equal(c.GrabbedAt) ||
			orderNo == nil || *orderNo != c.OrderNo {
			t.Fatalf("postgres has packet %d (%d cents, %v) for %s; the answer was %+v", id, amount, at, user, c)
		}
		n++
	}
	if rows.Err() != nil || n != packets {
		t.Fatalf("postgres holds %d claims (%v); want %d", n, rows.Err(), packets)
	}
	var status string
	var claimed int64
	if err := s.Pool.QueryRow(ctx, `SELECT status, claimed_cents FROM envelopes WHERE id = $1`, e.ID).
		Scan(&status, &claimed); err != nil {
		t.Fatal(err)
	}
	if status != "sold_out" || claimed != total {
		t.Fatalf("envelope %s with %d claimed cents; want sold_out with %d", status, claimed, total)
	}
}

func userID(u int) string { return fmt.Sprintf("user-%d", u) }

// grabOnce grabs for user u and checks the answer against the user's first
// one; it returns a description of anything wrong.
func grabOnce(ctx context.Context, s *stack.Stack, id int64, u, try int, first []*redisstore.Claim) string {
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
