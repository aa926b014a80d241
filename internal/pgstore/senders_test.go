package pgstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/pgstore"
)

// openFrom opens an envelope of sender with packets of 10 cents.
func openFrom(t *testing.T, s *pgstore.Store, id, firstPacket int64, sender string, packets int) {
	t.Helper()
	amounts := make([]int64, packets)
	for i := range amounts {
		amounts[i] = 10
	}
	e := pgstore.Envelope{ID: id, Shard: int(id % 16), SenderID: sender, TotalCents: int64(10 * packets),
		Count: packets, CreatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}
	if err := s.InsertEnvelope(t.Context(), e, firstPacket, amounts); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkLoaded(t.Context(), id); err != nil {
		t.Fatal(err)
	}
}

// senderOf is the sender a claim row carries ("<null>" for none).
func senderOf(t *testing.T, pool *pgxpool.Pool, packet int64) string {
	t.Helper()
	var s *string
	if err := pool.QueryRow(t.Context(), `SELECT sender_id FROM claims WHERE packet_id = $1`, packet).Scan(&s); err != nil {
		t.Fatalf("claim of packet %d: %v", packet, err)
	}
	if s == nil {
		return "<null>"
	}
	return *s
}

// The flusher's ways of writing a claim copy its envelope's sender onto it:
// the trusted COPY (envelopes looked up once, then remembered) and the
// guarded statement. A claim without one (written before migration 20, or
// through the packets view) still shows its envelope's sender in the user's
// history.
func TestClaimsCarryTheirSender(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	openFrom(t, s, 1, 100, "alice", 4)
	openFrom(t, s, 2, 200, "bob", 4)
	openFrom(t, s, 3, 300, "carol", 4)

	// Trusted, twice: the second batch's envelopes come from the cache, and
	// a new envelope beside them is looked up.
	apply(t, s, claim(1, 103, "u1"), claim(2, 203, "u1"))
	apply(t, s, claim(1, 102, "u2"), claim(3, 303, "u2"))
	apply(t, s, claim(1, 101, "u3")) // every envelope from the cache
	// Guarded: no amounts.
	if _, err := s.ApplyClaims(t.Context(), []pgstore.Claim{claim(2, 202, "u2")}); err != nil {
		t.Fatal(err)
	}
	// Through the view, as a DBA's repair or a loaded archive writes: no sender.
	if _, err := pool.Exec(t.Context(), `UPDATE packets SET claimed_by = 'u1', claimed_at = $1 WHERE id = 302`, t0); err != nil {
		t.Fatal(err)
	}
	for packet, want := range map[int64]string{103: "alice", 102: "alice", 101: "alice", 203: "bob", 202: "bob", 303: "carol", 302: "<null>"} {
		if got := senderOf(t, pool, packet); got != want {
			t.Errorf("claim of packet %d carries sender %s, want %s", packet, got, want)
		}
	}

	// The history shows every sender, the view's claim's from its envelope.
	for user, want := range map[string]string{"u1": "carol bob alice", "u2": "carol bob alice"} {
		page, err := s.UserClaims(t.Context(), user, 1<<62, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range page {
			got = append(got, c.SenderID)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s's senders, newest envelope first = %v, want %s", user, got, want)
		}
	}
}
