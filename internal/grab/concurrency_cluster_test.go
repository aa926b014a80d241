package grab_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/envelope"
	"redpacket/internal/flush"
	"redpacket/internal/grab"
	"redpacket/internal/redisstore"
	"redpacket/internal/testenv/stack"
)

// TestConcurrentGrabsMatchPostgres on a Redis Cluster: envelopes on several
// shards (and so on several masters), 1,500 users each trying every envelope
// twice from 64 goroutines. Per envelope exactly count winners, nobody twice,
// every repeat identical to the first answer, amounts summing to the total;
// after a flush PostgreSQL holds exactly the answers given and every envelope
// is sold out.
func TestClusterConcurrentGrabsMatchPostgres(t *testing.T) {
	t.Parallel()
	s := stack.NewCluster(t)
	ctx := context.Background()
	const envelopes, packets, users, workers, total = 4, 300, 1500, 64, 54321
	var es []grab.Envelope
	masters := map[string]bool{}
	for range envelopes {
		e, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "sender", TotalCents: total, Count: packets})
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
		node, err := s.RDB.(*redis.ClusterClient).MasterForKey(ctx, s.Redis.Keys().Meta(e.ID))
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	t.Logf("%d envelopes on %d masters", envelopes, len(masters))

	// first[i][u] is user u's first answer for envelope i; nil when refused.
	first := make([][]*redisstore.Claim, envelopes)
	for i := range first {
		first[i] = make([]*redisstore.Claim, users)
	}
	var mu sync.Mutex
	var failures []string
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
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
	for u := range users {
		jobs <- u
	}
	close(jobs)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d bad answers, first: %s", len(failures), failures[0])
	}

	winners := make([]map[string]redisstore.Claim, envelopes)
	for i, e := range es {
		winners[i] = map[string]redisstore.Claim{}
		byPacket := map[int64]string{}
		var sum int64
		for u, c := range first[i] {
			if c == nil {
				continue
			}
			user := userID(u)
			if other, dup := byPacket[c.PacketID]; dup {
				t.Fatalf("envelope %d: packet %d paid to %s and %s", e.ID, c.PacketID, other, user)
			}
			byPacket[c.PacketID] = user
			winners[i][user] = *c
			sum += c.AmountCents
		}
		if len(winners[i]) != packets || sum != total {
			t.Fatalf("envelope %d: %d winners holding %d cents; want %d holding %d", e.ID, len(winners[i]), sum, packets, total)
		}
	}

	f := flush.New(s.Redis, s.PG, flush.Config{BatchSize: 200}, nil)
	if err := f.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for i, e := range es {
		rows, err := s.Pool.Query(ctx, `SELECT id, amount_cents, claimed_by, claimed_at, order_no FROM packets
			WHERE envelope_id = $1 AND claimed_by IS NOT NULL`, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var id, amount int64
			var user string
			var at time.Time
			var orderNo *string
			if err := rows.Scan(&id, &amount, &user, &at, &orderNo); err != nil {
				t.Fatal(err)
			}
			c, ok := winners[i][user]
			if !ok || c.PacketID != id || c.AmountCents != amount || !at.Equal(c.GrabbedAt) ||
				orderNo == nil || *orderNo != c.OrderNo {
				t.Fatalf("postgres has packet %d (%d cents, %v) for %s; the answer was %+v", id, amount, at, user, c)
			}
			n++
		}
		if rows.Err() != nil || n != packets {
			t.Fatalf("envelope %d: postgres holds %d claims (%v); want %d", e.ID, n, rows.Err(), packets)
		}
		var status string
		var claimed int64
		if err := s.Pool.QueryRow(ctx, `SELECT status, claimed_cents FROM envelopes WHERE id = $1`, e.ID).
			Scan(&status, &claimed); err != nil {
			t.Fatal(err)
		}
		if status != "sold_out" || claimed != total {
			t.Fatalf("envelope %d %s with %d claimed cents; want sold_out with %d", e.ID, status, claimed, total)
		}
	}
	var conflicts int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM claim_conflicts`).Scan(&conflicts); err != nil || conflicts != 0 {
		t.Fatalf("%d claim conflicts (%v); want none", conflicts, err)
	}
}
