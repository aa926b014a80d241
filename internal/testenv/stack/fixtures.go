package stack

import (
	"fmt"
	"testing"

	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/pgstore"
)

// Claims are the answers of granted grabs, by user.
type Claims = map[string]grab.Claim

// Grabbed creates an envelope of count packets (count*100 cents in all) and
// grabs n of them by the distinct users u0, u1, ...; it returns the
// envelope and the claims answered.
func (s *Stack) Grabbed(t testing.TB, count, n int) (grab.Envelope, Claims) {
	t.Helper()
	ctx := t.Context()
	e, err := s.Svc.Create(ctx, envelope.CreateRequest{SenderID: "s", TotalCents: int64(count) * 100, Count: int64(count)})
	if err != nil {
		t.Fatalf("create an envelope of %d packets: %v", count, err)
	}
	claims := Claims{}
	for i := range n {
		u := fmt.Sprintf("u%d", i)
		c, err := s.Svc.Grab(ctx, e.ID, u)
		if err != nil {
			t.Fatalf("grab %d of envelope %d by %s: %v", i, e.ID, u, err)
		}
		claims[u] = c
	}
	return e, claims
}

// GrabbedOnEveryShard creates envelopes until every shard has one, grabbing
// n packets of each (see Grabbed).
func (s *Stack) GrabbedOnEveryShard(t testing.TB, n int) ([]grab.Envelope, []Claims) {
	t.Helper()
	k := s.Redis.Keys()
	covered := map[int]bool{}
	var es []grab.Envelope
	var claims []Claims
	for tries := 0; len(covered) < k.Shards(); tries++ {
		if tries == 4*k.Shards() {
			t.Fatalf("%d envelopes cover only shards %v", tries, covered)
		}
		e, c := s.Grabbed(t, n+2, n)
		covered[k.Shard(e.ID)] = true
		es, claims = append(es, e), append(claims, c)
	}
	return es, claims
}

// Envelope reads an envelope's row, failing the test when it cannot.
func (s *Stack) Envelope(t testing.TB, id int64) pgstore.Envelope {
	t.Helper()
	e, err := s.PG.Envelope(t.Context(), id)
	if err != nil {
		t.Fatalf("read envelope %d: %v", id, err)
	}
	return e
}

// ClaimedInPG counts the claimed packets PostgreSQL holds, of every envelope.
func (s *Stack) ClaimedInPG(t testing.TB) int {
	t.Helper()
	var n int
	if err := s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM packets WHERE claimed_by IS NOT NULL`).Scan(&n); err != nil {
		t.Fatalf("count claimed packets: %v", err)
	}
	return n
}

// Len is the length of a Redis list, failing the test when it cannot be read.
func (s *Stack) Len(t testing.TB, key string) int64 {
	t.Helper()
	n, err := s.RDB.LLen(t.Context(), key).Result()
	if err != nil {
		t.Fatalf("LLEN %s: %v", key, err)
	}
	return n
}

// AssertDurable checks that PostgreSQL holds exactly the answered claims of
// envelope id (each user's packet and amount), that claimed_cents counts
// each once, that no claim conflicted, and that Redis has nothing pending.
func (s *Stack) AssertDurable(t testing.TB, id int64, want Claims) {
	t.Helper()
	ctx := t.Context()
	rows, err := s.Pool.Query(ctx, `SELECT claimed_by, id, amount_cents FROM packets
		WHERE envelope_id = $1 AND claimed_by IS NOT NULL`, id)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int64{}
	for rows.Next() {
		var u string
		var p, a int64
		if err := rows.Scan(&u, &p, &a); err != nil {
			t.Fatal(err)
		}
		got[u] = [2]int64{p, a}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for u, c := range want {
		if got[u] != [2]int64{c.PacketID, c.AmountCents} {
			t.Errorf("user %s: postgres has %v, answered %+v", u, got[u], c)
		}
		sum += c.AmountCents
	}
	if len(got) != len(want) {
		t.Errorf("postgres holds %d claims, %d were answered", len(got), len(want))
	}
	var claimed, conflicts int64
	if err := s.Pool.QueryRow(ctx, `SELECT claimed_cents, (SELECT count(*) FROM claim_conflicts)
		FROM envelopes WHERE id = $1`, id).Scan(&claimed, &conflicts); err != nil {
		t.Fatal(err)
	}
	if claimed != sum || conflicts != 0 {
		t.Errorf("claimed_cents %d (want %d), %d conflicts (want 0)", claimed, sum, conflicts)
	}
	pending, err := s.Redis.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for shard, n := range pending {
		if n != 0 {
			t.Errorf("shard %d still has %d claims pending", shard, n)
		}
	}
}
