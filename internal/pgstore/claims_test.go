package pgstore_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/pgstore"
)

func conflict(c pgstore.Claim, reason string) pgstore.Conflict {
	return pgstore.Conflict{Claim: c, Reason: reason}
}

// sameConflicts compares conflicts ignoring order and time zones.
func sameConflicts(got, want []pgstore.Conflict) bool {
	if len(got) != len(want) {
		return false
	}
	key := func(c pgstore.Conflict) string {
		return fmt.Sprintf("%d/%d/%s/%d/%s", c.EnvelopeID, c.PacketID, c.UserID, c.ClaimedAt.UnixMicro(), c.Reason)
	}
	a, b := make([]string, len(got)), make([]string, len(want))
	for i := range got {
		a[i], b[i] = key(got[i]), key(want[i])
	}
	sort.Strings(a)
	sort.Strings(b)
	return slices.Equal(a, b)
}

func apply(t *testing.T, s *pgstore.Store, claims ...pgstore.Claim) pgstore.ApplyResult {
	t.Helper()
	res, err := s.ApplyClaims(t.Context(), s.WithAmounts(t, claims))
	if err != nil {
		t.Fatalf("ApplyClaims: %v", err)
	}
	return res
}

// conflictRows lists claim_conflicts as "envelope/packet/user/reason".
func conflictRows(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT envelope_id, packet_id, user_id, reason FROM claim_conflicts ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var e, p int64
		var u, r string
		if err := rows.Scan(&e, &p, &u, &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d/%d/%s/%s", e, p, u, r))
	}
	return out
}

func wantHolder(t *testing.T, pool *pgxpool.Pool, c pgstore.Claim) {
	t.Helper()
	by, at := holder(t, pool, c.PacketID)
	if by != c.UserID || at == nil || !at.Equal(c.ClaimedAt) {
		t.Errorf("packet %d held by %q at %v, want %q at %v", c.PacketID, by, at, c.UserID, c.ClaimedAt)
	}
}

func wantUnclaimed(t *testing.T, pool *pgxpool.Pool, packet int64) {
	t.Helper()
	if by, at := holder(t, pool, packet); by != "" || at != nil {
		t.Errorf("packet %d held by %q at %v, want nobody", packet, by, at)
	}
}

func TestApplyClaimsIdempotent(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{1, 20, 300, 4000, 5})
	batch := []pgstore.Claim{claim(1, 101, "a"), claim(1, 103, "b:x@y"), claim(1, 100, "c")}
	res := apply(t, s, batch...)
	if res.Applied != 3 || len(res.SoldOut) != 0 || len(res.Conflicts) != 0 {
		t.Fatalf("first apply = %+v, want 3 applied", res)
	}
	for _, c := range batch {
		wantHolder(t, pool, c)
	}
	wantUnclaimed(t, pool, 102)
	wantUnclaimed(t, pool, 104)
	if e := readEnvelope(t, s, 1); e.ClaimedCents != 4021 || e.Status != "open" {
		t.Errorf("envelope: %d cents claimed, status %q; want 4021, open", e.ClaimedCents, e.Status)
	}

	for range 2 {
		res = apply(t, s, batch...)
		if res.Applied != 0 || len(res.SoldOut) != 0 || len(res.Conflicts) != 0 {
			t.Errorf("replay = %+v, want nothing", res)
		}
		if e := readEnvelope(t, s, 1); e.ClaimedCents != 4021 {
			t.Errorf("claimed_cents %d after replay, want 4021", e.ClaimedCents)
		}
	}
	// A replay mixed with new claims applies only the new ones.
	res = apply(t, s, append(slices.Clone(batch), claim(1, 102, "d"))...)
	if res.Applied != 1 || len(res.Conflicts) != 0 || len(res.SoldOut) != 0 {
		t.Errorf("replay plus one = %+v, want 1 applied", res)
	}
	if e := readEnvelope(t, s, 1); e.ClaimedCents != 4321 {
		t.Errorf("claimed_cents %d, want 4321", e.ClaimedCents)
	}
	if rows := conflictRows(t, pool); len(rows) != 0 {
		t.Errorf("conflicts recorded: %v", rows)
	}
	if res := apply(t, s); res.Applied != 0 || len(res.Conflicts) != 0 || len(res.SoldOut) != 0 {
		t.Errorf("empty batch = %+v", res)
	}
}

func TestApplyClaimsSoldOut(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{3, 4, 5})
	if res := apply(t, s, claim(1, 100, "a"), claim(1, 101, "b")); len(res.SoldOut) != 0 || res.Applied != 2 {
		t.Errorf("first batch = %+v, want 2 applied, not sold out", res)
	}
	if e := readEnvelope(t, s, 1); e.Status != "open" || e.ClaimedCents != 7 {
		t.Errorf("envelope %q with %d cents, want open with 7", e.Status, e.ClaimedCents)
	}
	last := []pgstore.Claim{claim(1, 102, "c")}
	res := apply(t, s, last...)
	if res.Applied != 1 || !slices.Equal(res.SoldOut, []int64{1}) {
		t.Errorf("last batch = %+v, want envelope 1 sold out", res)
	}
	if e := readEnvelope(t, s, 1); e.Status != "sold_out" || e.ClaimedCents != 12 {
		t.Errorf("envelope %q with %d cents, want sold_out with 12", e.Status, e.ClaimedCents)
	}
	// Reported once: the replay does not report it again.
	if res := apply(t, s, last...); res.Applied != 0 || len(res.SoldOut) != 0 || len(res.Conflicts) != 0 {
		t.Errorf("replay of the last batch = %+v, want nothing", res)
	}
	// A claim on a sold-out envelope by someone new is a conflict.
	late := claim(1, 102, "late")
	if res := apply(t, s, late); !sameConflicts(res.Conflicts, []pgstore.Conflict{conflict(late, "claimed_by_another_user")}) {
		t.Errorf("late claim = %+v", res)
	}

	// In one batch, one envelope sells out and another does not.
	open(t, s, 2, 200, []int64{1, 1})
	open(t, s, 3, 300, []int64{1, 1})
	res = apply(t, s, claim(2, 200, "a"), claim(2, 201, "b"), claim(3, 300, "a"))
	if res.Applied != 3 || !slices.Equal(res.SoldOut, []int64{2}) {
		t.Errorf("mixed batch = %+v, want 3 applied, envelope 2 sold out", res)
	}

	// An envelope still loading is fully claimed but not moved to sold_out.
	insert(t, s, 4, 400, []int64{2, 2}, t0)
	res = apply(t, s, claim(4, 400, "a"), claim(4, 401, "b"))
	if res.Applied != 2 || len(res.SoldOut) != 0 {
		t.Errorf("loading envelope batch = %+v, want 2 applied, none sold out", res)
	}
	if e := readEnvelope(t, s, 4); e.Status != "loading" || e.ClaimedCents != 4 {
		t.Errorf("loading envelope: %q with %d cents, want loading with 4", e.Status, e.ClaimedCents)
	}
	// An expired one (closed while its last claims were queued) whose last
	// packet was granted before the close did sell out: it says so, once.
	open(t, s, 5, 500, []int64{2, 3})
	if _, err := pool.Exec(t.Context(), `UPDATE envelopes SET status = 'expired' WHERE id = 5`); err != nil {
		t.Fatal(err)
	}
	res = apply(t, s, claim(5, 500, "a"))
	if res.Applied != 1 || len(res.SoldOut) != 0 {
		t.Errorf("expired envelope's first claim = %+v, want 1 applied, not sold out", res)
	}
	if e := readEnvelope(t, s, 5); e.Status != "expired" || e.ClaimedCents != 2 {
		t.Errorf("expired envelope: %q with %d cents, want expired with 2", e.Status, e.ClaimedCents)
	}
	res = apply(t, s, claim(5, 501, "b"))
	if res.Applied != 1 || !slices.Equal(res.SoldOut, []int64{5}) {
		t.Errorf("expired envelope's last claim = %+v, want envelope 5 sold out", res)
	}
	if e := readEnvelope(t, s, 5); e.Status != "sold_out" || e.ClaimedCents != 5 {
		t.Errorf("expired envelope after its last claim: %q with %d cents, want sold_out with 5", e.Status, e.ClaimedCents)
	}
	var events int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM events WHERE type = 'envelope.sold_out' AND envelope_id = 5`).Scan(&events); err != nil || events != 1 {
		t.Errorf("envelope.sold_out events of envelope 5 = %d, %v; want 1", events, err)
	}
}

func TestApplyClaimsConflicts(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{10, 20, 30, 40})
	open(t, s, 2, 200, []int64{7, 8})

	held := claim(1, 100, "alice")
	apply(t, s, held, claim(1, 101, "carol"))
	stolen := claim(1, 100, "bob")
	unknown := claim(1, 999, "dave")
	wrong := claim(1, 200, "erin")
	second := claim(1, 102, "alice")
	fine := claim(1, 103, "frank")
	batch := []pgstore.Claim{stolen, unknown, wrong, second, fine}

	res := apply(t, s, batch...)
	want := []pgstore.Conflict{
		conflict(stolen, "claimed_by_another_user"),
		conflict(unknown, "unknown_packet"),
		conflict(wrong, "wrong_envelope"),
		conflict(second, "user_holds_another_packet"),
	}
	if res.Applied != 1 || !sameConflicts(res.Conflicts, want) || len(res.SoldOut) != 0 {
		t.Fatalf("ApplyClaims = %+v\nwant 1 applied and conflicts %+v", res, want)
	}
	wantHolder(t, pool, held)
	wantHolder(t, pool, fine)
	wantUnclaimed(t, pool, 102)
	wantUnclaimed(t, pool, 200)
	if e := readEnvelope(t, s, 1); e.ClaimedCents != 10+20+40 {
		t.Errorf("envelope 1 claimed_cents %d, want 70", e.ClaimedCents)
	}
	if e := readEnvelope(t, s, 2); e.ClaimedCents != 0 {
		t.Errorf("envelope 2 claimed_cents %d, want 0", e.ClaimedCents)
	}
	wantRows := []string{
		"1/100/bob/claimed_by_another_user", "1/999/dave/unknown_packet",
		"1/200/erin/wrong_envelope", "1/102/alice/user_holds_another_packet",
	}
	wantConflictsRecorded(t, pool, wantRows, stolen)

	// Replayed, nothing new is applied, reported or recorded.
	for range 2 {
		res = apply(t, s, batch...)
		if res.Applied != 0 || len(res.Conflicts) != 0 || len(res.SoldOut) != 0 {
			t.Errorf("replay = %+v, want nothing", res)
		}
	}
	if got := conflictRows(t, pool); len(got) != len(wantRows) {
		t.Errorf("claim_conflicts after replay = %v", got)
	}
	if e := readEnvelope(t, s, 1); e.ClaimedCents != 70 {
		t.Errorf("claimed_cents %d after replay, want 70", e.ClaimedCents)
	}

	wantRefundedNeverClaimed(t, s, pool)
}

// wantConflictsRecorded checks that claim_conflicts holds the rows want
// ("envelope/packet/user/reason"), and the time of the stolen claim.
func wantConflictsRecorded(t *testing.T, pool *pgxpool.Pool, want []string, stolen pgstore.Claim) {
	t.Helper()
	rows := conflictRows(t, pool)
	if !slices.Equal(sorted(rows), sorted(want)) {
		t.Errorf("claim_conflicts = %v, want %v", rows, want)
	}
	var at time.Time
	if err := pool.QueryRow(t.Context(), `SELECT claimed_at FROM claim_conflicts WHERE user_id = 'bob'`).Scan(&at); err != nil || !at.Equal(stolen.ClaimedAt) {
		t.Errorf("conflict claimed_at = %v, %v; want %v", at, err, stolen.ClaimedAt)
	}
}

// wantRefundedNeverClaimed checks that a claim of a refunded packet
// (packet 201) is a conflict and leaves the packet unclaimed.
func wantRefundedNeverClaimed(t *testing.T, s *pgstore.Store, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `UPDATE packets SET refunded_at = now() WHERE id = 201`); err != nil {
		t.Fatal(err)
	}
	refunded := claim(2, 201, "gina")
	res := apply(t, s, refunded)
	if res.Applied != 0 || !sameConflicts(res.Conflicts, []pgstore.Conflict{conflict(refunded, "packet_refunded")}) {
		t.Errorf("claim of a refunded packet = %+v", res)
	}
	wantUnclaimed(t, pool, 201)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// TestApplyClaimsSameUserTwiceInBatch is the case where Redis re-offered
// packets: one user's two claims of one envelope reach PostgreSQL together.
func TestApplyClaimsSameUserTwiceInBatch(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{10, 20, 30, 40})
	open(t, s, 2, 200, []int64{5, 6})
	firstClaim := claim(1, 102, "alice")
	secondClaim := claim(1, 100, "alice")
	batch := []pgstore.Claim{claim(2, 200, "bob"), firstClaim, claim(1, 101, "bob"), secondClaim, claim(1, 103, "carol")}

	res, err := s.ApplyClaims(t.Context(), s.WithAmounts(t, batch))
	if err != nil {
		t.Fatalf("ApplyClaims: %v", err)
	}
	want := []pgstore.Conflict{conflict(secondClaim, "user_holds_another_packet")}
	if res.Applied != 4 || !sameConflicts(res.Conflicts, want) || len(res.SoldOut) != 0 {
		t.Fatalf("ApplyClaims = %+v, want 4 applied and %+v", res, want)
	}
	wantHolder(t, pool, firstClaim)
	wantUnclaimed(t, pool, 100)
	wantHolder(t, pool, batch[0])
	wantHolder(t, pool, batch[2])
	wantHolder(t, pool, batch[4])
	if e := readEnvelope(t, s, 1); e.ClaimedCents != 20+30+40 {
		t.Errorf("envelope 1 claimed_cents %d, want 90", e.ClaimedCents)
	}
	if e := readEnvelope(t, s, 2); e.ClaimedCents != 5 {
		t.Errorf("envelope 2 claimed_cents %d, want 5", e.ClaimedCents)
	}
	if n := count(t, pool, `SELECT count(*) FROM packets WHERE envelope_id = 1 AND claimed_by = 'alice'`); n != 1 {
		t.Errorf("alice holds %d packets of envelope 1", n)
	}

	res, err = s.ApplyClaims(t.Context(), s.WithAmounts(t, batch))
	if err != nil || res.Applied != 0 || len(res.Conflicts) != 0 || len(res.SoldOut) != 0 {
		t.Errorf("replay = %+v, %v; want nothing", res, err)
	}
	if rows := conflictRows(t, pool); !slices.Equal(rows, []string{"1/100/alice/user_holds_another_packet"}) {
		t.Errorf("claim_conflicts = %v", rows)
	}

	// The fallback also reports the sale of the last packet.
	open(t, s, 3, 300, []int64{1, 1})
	last := []pgstore.Claim{claim(3, 300, "x"), claim(3, 301, "y"), claim(2, 201, "zed"), claim(2, 201, "zed2")}
	last = append(last, claim(3, 300, "y")) // y twice in envelope 3
	res, err = s.ApplyClaims(t.Context(), s.WithAmounts(t, last))
	if err != nil {
		t.Fatalf("ApplyClaims: %v", err)
	}
	if res.Applied != 3 || !slices.Equal(sorted64(res.SoldOut), []int64{2, 3}) {
		t.Errorf("ApplyClaims = %+v, want 3 applied, envelopes 2 and 3 sold out", res)
	}
	wantC := []pgstore.Conflict{conflict(last[3], "claimed_by_another_user"), conflict(last[4], "claimed_by_another_user")}
	if !sameConflicts(res.Conflicts, wantC) {
		t.Errorf("conflicts = %+v, want %+v", res.Conflicts, wantC)
	}
}

func sorted64(s []int64) []int64 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestApplyClaimsSamePacketTwiceInBatch: two users' claims of one packet in
// one batch: exactly one holds it, the other is a conflict.
func TestApplyClaimsSamePacketTwiceInBatch(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{10, 20})
	a, b := claim(1, 100, "a"), claim(1, 100, "b")
	res := apply(t, s, a, b)
	if res.Applied != 1 || len(res.Conflicts) != 1 || res.Conflicts[0].Reason != "claimed_by_another_user" {
		t.Fatalf("ApplyClaims = %+v, want 1 applied, 1 conflict", res)
	}
	by, _ := holder(t, pool, 100)
	if loser := res.Conflicts[0].UserID; by == loser || (by != "a" && by != "b") {
		t.Errorf("packet held by %q, conflict for %q", by, loser)
	}
	if e := readEnvelope(t, s, 1); e.ClaimedCents != 10 {
		t.Errorf("claimed_cents %d, want 10", e.ClaimedCents)
	}
	// The exact same claim twice in a batch counts once.
	c := claim(1, 101, "c")
	res = apply(t, s, c, c)
	if res.Applied != 1 || len(res.Conflicts) != 0 {
		t.Errorf("duplicate claim = %+v, want 1 applied", res)
	}
	if e := readEnvelope(t, s, 1); e.ClaimedCents != 30 || e.Status != "sold_out" {
		t.Errorf("envelope %q with %d cents, want sold_out with 30", e.Status, e.ClaimedCents)
	}
}

func TestApplyClaimsSeveralEnvelopes(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	const envelopes, per = 6, 5
	var batch []pgstore.Claim
	want := map[int64]int64{}
	for e := int64(1); e <= envelopes; e++ {
		amounts := make([]int64, per)
		for i := range amounts {
			amounts[i] = e*100 + int64(i)
		}
		f := open(t, s, e, e*1000, amounts)
		// Envelope e gets e-1 claims (capped at per-1: none sells out).
		for i := 0; i < int(e-1) && i < per-1; i++ {
			batch = append(batch, claim(e, f.packet(i), fmt.Sprintf("user-%d", i)))
			want[e] += amounts[i]
		}
	}
	// Interleave envelopes in the batch.
	slices.SortFunc(batch, func(a, b pgstore.Claim) int { return int(a.PacketID%1000 - b.PacketID%1000) })
	res := apply(t, s, batch...)
	if res.Applied != len(batch) || len(res.Conflicts) != 0 || len(res.SoldOut) != 0 {
		t.Fatalf("ApplyClaims = %+v, want %d applied", res, len(batch))
	}
	for e := int64(1); e <= envelopes; e++ {
		if got := readEnvelope(t, s, e).ClaimedCents; got != want[e] {
			t.Errorf("envelope %d claimed_cents %d, want %d", e, got, want[e])
		}
		var sum int64
		if err := pool.QueryRow(t.Context(), `SELECT coalesce(sum(amount_cents), 0) FROM packets
			WHERE envelope_id = $1 AND claimed_by IS NOT NULL`, e).Scan(&sum); err != nil || sum != want[e] {
			t.Errorf("envelope %d: claimed packets sum to %d, %v; want %d", e, sum, err, want[e])
		}
	}
}

// TestApplyClaimsOrderNoInUse is the case where Redis lost its order-number
// counter: a new claim carries a number another packet has. The claim
// counts, without the number, and the reuse is recorded once.
func TestApplyClaimsOrderNoInUse(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{10, 20, 30})
	first := claim(1, 100, "alice")
	first.OrderNo = "20261121000001"
	if res := apply(t, s, first); res.Applied != 1 || len(res.Conflicts) != 0 {
		t.Fatalf("first claim = %+v", res)
	}
	reused := claim(1, 101, "bob")
	reused.OrderNo = first.OrderNo
	for try := range 2 {
		res := apply(t, s, reused)
		wantApplied, wantConflicts := 1, []pgstore.Conflict{conflict(reused, pgstore.ConflictOrderNo)}
		if try > 0 {
			wantApplied, wantConflicts = 0, nil
		}
		if res.Applied != wantApplied || !sameConflicts(res.Conflicts, wantConflicts) {
			t.Fatalf("try %d: claim with a reused order number = %+v", try, res)
		}
	}
	wantHolder(t, pool, reused)
	var orderNo *string
	if err := pool.QueryRow(t.Context(), `SELECT order_no FROM packets WHERE id = 101`).Scan(&orderNo); err != nil || orderNo != nil {
		t.Errorf("order_no of the claim = %v, %v; want NULL", orderNo, err)
	}
	if rows := conflictRows(t, pool); !slices.Equal(rows, []string{"1/101/bob/order_no_in_use"}) {
		t.Errorf("claim_conflicts = %v", rows)
	}
	if e := readEnvelope(t, s, 1); e.ClaimedCents != 30 {
		t.Errorf("claimed_cents %d, want 30", e.ClaimedCents)
	}
}

// The holder's own packet granted again under a new order number (Redis
// came back from an older copy of its data, lost the grant and granted the
// packet again): the ledger keeps its claim and order number, and the
// regrant is recorded as such, not as a harmless reused number.
func TestApplyClaimsRegrantedToHolder(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{10, 20, 30})
	first := claim(1, 100, "alice")
	first.OrderNo = "20261121000001"
	if res := apply(t, s, first); res.Applied != 1 || len(res.Conflicts) != 0 {
		t.Fatalf("first claim = %+v", res)
	}
	again := first
	again.OrderNo = "20261121160001"
	if res := apply(t, s, again); res.Applied != 0 || !sameConflicts(res.Conflicts, []pgstore.Conflict{conflict(again, "regranted_to_holder")}) {
		t.Fatalf("the holder's packet under a new order number = %+v", res)
	}
	var orderNo string
	if err := pool.QueryRow(t.Context(), `SELECT order_no FROM packets WHERE id = 100`).Scan(&orderNo); err != nil || orderNo != first.OrderNo {
		t.Errorf("order_no of the claim = %q, %v; want the first's %s", orderNo, err, first.OrderNo)
	}
	if rows := conflictRows(t, pool); !slices.Equal(rows, []string{"1/100/alice/regranted_to_holder"}) {
		t.Errorf("claim_conflicts = %v", rows)
	}
}

// TestClaimStatementsShareTheirTail keeps the two claim statements adding
// to the envelopes with the same text: how claimed cents, status and the
// luckiest grab move, and what they return. Their inputs differ (AddClaims
// takes its runs' sums from the caller, ApplyClaimsGuarded sums what it
// inserted) and so do their events (AddClaims writes runs of claim events,
// ApplyClaimsGuarded events rows).
func TestClaimStatementsShareTheirTail(t *testing.T) {
	t.Parallel()
	update := func(name, q string) string {
		i, j := strings.Index(q, "    UPDATE envelopes e\n"), strings.Index(q, "    FROM runs r\n")
		k := strings.Index(q, "    RETURNING e.id,")
		end := strings.Index(q, "), new_events AS (")
		if i < 0 || j < i || k < j || end < k {
			t.Fatalf("%s has no UPDATE envelopes e ... FROM runs r ... RETURNING before its events", name)
		}
		return q[i:j] + q[k:end]
	}
	a, g := update("AddClaims", dbsqlc.AddClaims), update("ApplyClaimsGuarded", dbsqlc.ApplyClaimsGuarded)
	if a != g {
		t.Fatalf("AddClaims and ApplyClaimsGuarded add to the envelopes differently:\n%s\nvs\n%s", a, g)
	}
}
