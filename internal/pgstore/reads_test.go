package pgstore_test

import (
	"testing"
	"time"

	"redpacket/internal/pgstore"
)

func TestBestClaimIsTheFirstHandedOutOnATie(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	// Hand-out order is descending id: 103 (2), 102 (9), 101 (9), 100 (5).
	f := open(t, s, 1, 100, []int64{5, 9, 9, 2})
	if b, err := s.BestClaim(t.Context(), f.ID); err != nil || b != nil {
		t.Fatalf("best of an envelope without claims = %+v, %v", b, err)
	}
	var claims []pgstore.Claim
	for i, p := range []int64{103, 102, 101, 100} {
		c := claim(f.ID, p, string(rune('a'+i)))
		c.ClaimedAt = t0 // one millisecond: only the hand-out order tells them apart
		c.OrderNo = "2026112200000" + string(rune('1'+i))
		claims = append(claims, c)
	}
	if _, err := s.ApplyClaims(t.Context(), claims); err != nil {
		t.Fatal(err)
	}
	b, err := s.BestClaim(t.Context(), f.ID)
	if err != nil || b == nil || b.PacketID != 102 || b.UserID != "b" || b.AmountCents != 9 ||
		b.OrderNo != "20261122000002" || !b.GrabbedAt.Equal(t0) {
		t.Fatalf("best = %+v, %v; want packet 102 of b, the first 9 handed out", b, err)
	}
	list, err := s.EnvelopeClaims(t.Context(), f.ID, 1<<62, 10)
	if err != nil || len(list) != 4 || list[0].PacketID != 103 || list[3].PacketID != 100 || list[1].UserID != b.UserID || list[1].OrderNo != b.OrderNo {
		t.Fatalf("claims = %+v, %v", list, err)
	}
	if rest, err := s.EnvelopeClaims(t.Context(), f.ID, 102, 10); err != nil || len(rest) != 2 || rest[0].PacketID != 101 {
		t.Fatalf("claims after 102 = %+v, %v", rest, err)
	}
	mine, err := s.UserClaims(t.Context(), "a", 1<<62, 10)
	if err != nil || len(mine) != 1 || mine[0].PacketID != 103 || mine[0].SenderID != "sender-1" {
		t.Fatalf("claims of a = %+v, %v", mine, err)
	}
	if none, err := s.UserClaims(t.Context(), "a", f.ID, 10); err != nil || len(none) != 0 {
		t.Fatalf("claims of a before its only claim's envelope = %+v, %v", none, err)
	}
}

// The luckiest grab is kept on the envelope's row batch by batch: a later
// batch's larger claim takes it, a later equal one (handed out after) does
// not, and a replayed batch changes nothing.
func TestBestClaimAcrossBatches(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	// Hand-out order is descending id: 104 (2), 103 (9), 102 (12), 101 (12), 100 (5).
	f := open(t, s, 1, 100, []int64{5, 12, 12, 9, 2})
	g := open(t, s, 2, 200, []int64{4, 6})
	best := func(env, want int64) {
		t.Helper()
		b, err := s.BestClaim(t.Context(), env)
		if err != nil || b == nil || b.PacketID != want {
			t.Fatalf("best of %d = %+v, %v; want packet %d", env, b, err, want)
		}
	}
	apply := func(claims ...pgstore.Claim) {
		t.Helper()
		if _, err := s.ApplyClaims(t.Context(), claims); err != nil {
			t.Fatal(err)
		}
	}
	first := []pgstore.Claim{claim(f.ID, 104, "a"), claim(f.ID, 103, "b"), claim(g.ID, 201, "a")}
	apply(first...)
	best(f.ID, 103)
	best(g.ID, 201)
	apply(claim(f.ID, 102, "c"), claim(g.ID, 200, "b"))
	best(f.ID, 102)
	best(g.ID, 201)
	apply(claim(f.ID, 101, "d"), claim(f.ID, 100, "e"))
	best(f.ID, 102)
	apply(first...)
	best(f.ID, 102)
	best(g.ID, 201)
	// Flushed out of hand-out order (a reloaded envelope): an equal amount
	// handed out earlier (a higher id) still takes it.
	h := open(t, s, 3, 300, []int64{7, 7})
	apply(claim(h.ID, 300, "a"))
	best(h.ID, 300)
	apply(claim(h.ID, 301, "b"))
	best(h.ID, 301)
}

// The settlement checks the luckiest grab on the envelope's row against its
// packets: a row left behind (claims written by a flusher older than the
// row's best columns) is corrected, and the settlement says so; a row that
// agrees is left as it is.
func TestSettlementWritesThePacketsBest(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	f := open(t, s, 1, 100, []int64{5, 12, 9})
	g := open(t, s, 2, 200, []int64{4, 6})
	if _, err := s.ApplyClaims(t.Context(), []pgstore.Claim{
		claim(f.ID, 102, "a"), claim(f.ID, 101, "b"), claim(g.ID, 201, "a"),
	}); err != nil {
		t.Fatal(err)
	}
	// As an older flusher would have left it: no best at all.
	if _, err := pool.Exec(t.Context(), `UPDATE envelopes SET best_packet_id = NULL, best_amount_cents = NULL WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	if b, err := s.BestClaim(t.Context(), f.ID); err != nil || b != nil {
		t.Fatalf("best before the settlement = %+v, %v; want none (the row was cleared)", b, err)
	}
	st, err := s.Settle(t.Context(), f.ID, t0.Add(time.Hour), "open")
	if err != nil || !st.BestCorrected {
		t.Fatalf("settle = %+v, %v; want the best corrected", st, err)
	}
	if b, err := s.BestClaim(t.Context(), f.ID); err != nil || b == nil || b.PacketID != 101 || b.AmountCents != 12 {
		t.Fatalf("best after the settlement = %+v, %v; want packet 101 (12)", b, err)
	}
	st, err = s.Settle(t.Context(), g.ID, t0.Add(time.Hour), "open")
	if err != nil || st.BestCorrected {
		t.Fatalf("settle of an envelope whose row agrees = %+v, %v", st, err)
	}
	if b, err := s.BestClaim(t.Context(), g.ID); err != nil || b == nil || b.PacketID != 201 {
		t.Fatalf("best of the other envelope = %+v, %v; want packet 201", b, err)
	}
}
