package pgstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/pgstore"
)

// A claim is written with its packet's amount: one whose grab was told a
// different amount (a Redis that lost or corrupted state) is applied with
// the packet's, and the envelope counts the packet's.
func TestApplyClaimsKeepsThePacketsAmount(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{10, 20, 30})
	good := claim(1, 100, "a")
	good.AmountCents = 10
	wrong := claim(1, 101, "b")
	wrong.AmountCents = 999
	res := mustApply(t, s, good, wrong)
	if res.Applied != 2 || len(res.Conflicts) != 0 {
		t.Fatalf("ApplyClaims = %+v, want 2 applied", res)
	}
	if e := readEnvelope(t, s, 1); e.ClaimedCents != 30 {
		t.Errorf("claimed_cents %d, want 30 (10 + the packet's 20)", e.ClaimedCents)
	}
	if n := count(t, pool, `SELECT sum(amount_cents) FROM claims WHERE envelope_id = 1`); n != 30 {
		t.Errorf("claims hold %d cents, want 30", n)
	}
	wantHolder(t, pool, wrong)
}

// A claim of a refunded packet told its right amount is still refused, and
// so is the whole trusted batch it came in: the rest is applied the guarded
// way, the refunded packet stays unclaimed.
func TestApplyClaimsRefusesARefundedPacketWithItsAmount(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{10, 20, 30})
	if _, err := pool.Exec(t.Context(), `UPDATE packet_pool SET refunded_at = now() WHERE id = 102`); err != nil {
		t.Fatal(err)
	}
	refunded := claim(1, 102, "late")
	res := apply(t, s, claim(1, 100, "a"), refunded)
	if res.Applied != 1 || !sameConflicts(res.Conflicts, []pgstore.Conflict{conflict(refunded, "packet_refunded")}) {
		t.Fatalf("ApplyClaims = %+v, want 1 applied and packet 102 refused", res)
	}
	wantUnclaimed(t, pool, 102)
	if e := readEnvelope(t, s, 1); e.ClaimedCents != 10 {
		t.Errorf("claimed_cents %d, want 10", e.ClaimedCents)
	}
}

// A settlement that refunds a packet while a batch claiming it waits for
// the envelope's row wins: the batch finds the envelope's cents would pass
// its total, and its claim of that packet becomes a conflict. Nothing is
// both claimed and refunded, and the envelope's cents add up.
func TestApplyClaimsLosesARaceWithTheRefund(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{10, 20, 30})
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	// The settlement's first steps: the envelope locked, its unclaimed
	// packets refunded, not yet committed.
	for _, q := range []string{
		`SELECT id FROM envelopes WHERE id = 1 FOR UPDATE`,
		`UPDATE packet_pool SET refunded_at = now() WHERE envelope_id = 1`,
		`UPDATE envelopes SET refunded_cents = 60, status = 'settled', settled_at = now() WHERE id = 1`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	late := claim(1, 101, "late")
	batch := s.WithAmounts(t, []pgstore.Claim{late})
	done := make(chan pgstore.ApplyResult, 1)
	go func() {
		res, err := s.ApplyClaims(ctx, batch)
		if err != nil {
			t.Errorf("ApplyClaims: %v", err)
		}
		done <- res
	}()
	// The batch waits for the envelope's row lock.
	deadline := time.Now().Add(10 * time.Second)
	for count(t, pool, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the claim batch never waited for the envelope's row")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.Applied != 0 || !sameConflicts(res.Conflicts, []pgstore.Conflict{conflict(late, "packet_refunded")}) {
		t.Errorf("ApplyClaims = %+v, want packet 101 refused as refunded", res)
	}
	wantUnclaimed(t, pool, 101)
	if e := readEnvelope(t, s, 1); e.ClaimedCents != 0 || e.RefundedCents != 60 {
		t.Errorf("envelope: claimed %d, refunded %d; want 0 and 60", e.ClaimedCents, e.RefundedCents)
	}
}

func mustApply(t *testing.T, s *pgstore.Store, claims ...pgstore.Claim) pgstore.ApplyResult {
	t.Helper()
	res, err := s.ApplyClaims(t.Context(), claims)
	if err != nil {
		t.Fatalf("ApplyClaims: %v", err)
	}
	return res
}

// AddClaims changes nothing, and returns no rows, unless every claim of
// every run matches its packet and the runs cover the batch exactly; the
// caller then refuses the batch. Each case is what a mistake in laying a
// batch out, or a Redis that lost state, would send. A matching run adds
// its claims' cents and best claim, whatever their order.
func TestAddClaimsChangesNothingUnlessEveryRunMatches(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{10, 20, 30})
	open(t, s, 2, 200, []int64{5, 5})
	run := func(envelope int64, packets, amounts []int64) dbsqlc.AddClaimsParams {
		return dbsqlc.AddClaimsParams{PacketIds: packets, Amounts: amounts, RunEnvelopeIds: []int64{envelope},
			RunCounts: []int64{int64(len(packets))}, RunNoOrders: []int64{0}}
	}
	short := run(1, []int64{100, 101}, []int64{10, 20})
	short.RunCounts = []int64{1}
	long := run(1, []int64{100}, []int64{10})
	long.RunCounts = []int64{2}
	fewerAmounts := run(1, []int64{100, 101}, []int64{10, 20})
	fewerAmounts.Amounts = []int64{10}
	noCount := run(1, []int64{100, 101}, []int64{10, 20})
	noCount.RunCounts = nil
	cases := map[string]dbsqlc.AddClaimsParams{
		"a run shorter than the batch": short,
		"a run longer than the batch":  long,
		"fewer amounts than packets":   fewerAmounts,
		"a run without its count":      noCount,
		"another amount":               run(1, []int64{100, 101}, []int64{10, 21}),
		"another envelope's packet":    run(2, []int64{200, 102}, []int64{5, 30}),
		"no such packet":               run(1, []int64{100, 999}, []int64{10, 20}),
	}
	for name, p := range cases {
		tx, err := pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		rows, err := dbsqlc.New(tx).AddClaims(t.Context(), p)
		var runs int64
		if err == nil {
			err = tx.QueryRow(t.Context(), `SELECT count(*) FROM claim_event_runs`).Scan(&runs)
		}
		if err != nil || len(rows) != 0 || runs != 0 {
			t.Errorf("%s: AddClaims = %+v, %v, and %d runs; want nothing changed", name, rows, err, runs)
		}
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := dbsqlc.New(pool).AddClaims(t.Context(), run(1, []int64{101, 100}, []int64{20, 10}))
	if err != nil || len(rows) != 1 || rows[0].N != 2 {
		t.Fatalf("AddClaims of a matching run = %+v, %v; want envelope 1 with 2 claims", rows, err)
	}
	if e := readEnvelope(t, s, 1); e.ClaimedCents != 30 {
		t.Errorf("claimed_cents %d, want 30", e.ClaimedCents)
	}
	if best := count(t, pool, `SELECT best_packet_id FROM envelopes WHERE id = 1`); best != 101 {
		t.Errorf("best_packet_id %d, want 101 (20 cents)", best)
	}
	if n := count(t, pool, `SELECT cardinality(packet_ids) FROM claim_event_runs WHERE envelope_id = 1`); n != 2 {
		t.Errorf("the run holds %d packets, want 2", n)
	}
}

// A run lists its envelope's claims in grab order as PostgreSQL sorts them,
// (claimed_at, packet_id descending: grabs of one instant in hand-out order,
// highest packet first), also when their times differ by less than the
// microsecond PostgreSQL keeps: there the packet id decides.
func TestClaimRunFollowsTheStoredClaimOrder(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	open(t, s, 1, 100, []int64{10, 20, 30})
	at := time.Date(2030, 5, 17, 8, 0, 0, 0, time.UTC)
	first, second, third := claim(1, 100, "a"), claim(1, 101, "b"), claim(1, 102, "c")
	first.ClaimedAt, second.ClaimedAt, third.ClaimedAt = at.Add(700), at.Add(200), at.Add(-time.Millisecond)
	first.AmountCents, second.AmountCents, third.AmountCents = 10, 20, 30
	if res := mustApply(t, s, first, second, third); res.Applied != 3 {
		t.Fatalf("ApplyClaims = %+v, want 3 applied", res)
	}
	var run, stored []int64
	if err := pool.QueryRow(t.Context(), `SELECT packet_ids FROM claim_event_runs WHERE envelope_id = 1`).Scan(&run); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(t.Context(), `SELECT array_agg(packet_id ORDER BY claimed_at, packet_id DESC) FROM claims
		WHERE envelope_id = 1`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(run, []int64{102, 101, 100}) || !slices.Equal(run, stored) {
		t.Errorf("the run lists %v, claims sort as %v; want both [102 101 100]", run, stored)
	}
}

// Grabs of one envelope in one millisecond (a coalesced call's) get their
// packet.claimed events in hand-out order, highest packet first, on the
// guarded way as on the trusted one.
func TestSameMillisecondClaimsInHandOutOrder(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	at := time.Date(2030, 5, 17, 8, 0, 0, 0, time.UTC)
	for env, guarded := range map[int64]bool{1: false, 2: true} {
		open(t, s, env, 100*env, []int64{10, 20, 30})
		cs := []pgstore.Claim{claim(env, 100*env+2, "first"), claim(env, 100*env+1, "second")}
		for i := range cs {
			cs[i].ClaimedAt = at
			if guarded {
				cs[i].AmountCents = 0 // no amounts: the guarded statement
			} else {
				cs[i].AmountCents = []int64{30, 20}[i]
			}
		}
		if _, err := s.ApplyClaims(t.Context(), cs); err != nil {
			t.Fatal(err)
		}
		var order []int64
		if err := pool.QueryRow(t.Context(), `SELECT array_agg((data->>'packet_id')::bigint ORDER BY id) FROM event_messages
			WHERE envelope_id = $1 AND type = 'packet.claimed'`, env).Scan(&order); err != nil {
			t.Fatal(err)
		}
		if want := []int64{100*env + 2, 100*env + 1}; !slices.Equal(order, want) {
			t.Errorf("guarded %v: claim events of packets %v, want %v (hand-out order)", guarded, order, want)
		}
	}
}
