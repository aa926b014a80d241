package pgstore_test

import (
	"math"
	"regexp"
	"slices"
	"testing"
	"time"

	"redpacket/internal/db/dbsqlc"
	"redpacket/internal/pgstore"
	"redpacket/internal/telemetry"
)

// Every settlement counts in the totals the flushers export, whoever makes
// it: the daemon's (from open), an operator's refund of a suspended
// envelope (what flusher recover runs, a process no one scrapes), a given-up
// load; a settlement refused for its status counts nothing.
func TestLedgerCountsEverySettlement(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	read := func() telemetry.Ledger {
		t.Helper()
		l, err := s.Ledger(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if l := read(); len(l.Finished) != 2 || l.Finished["settled"] != (telemetry.Finished{}) ||
		l.Suspended != 0 || !l.Audit.FinishedAt.IsZero() {
		t.Fatalf("fresh database: %+v, want zero settled and failed rows, nothing suspended, no audit", l)
	}

	a := open(t, s, 1001, 5001, []int64{100, 200, 300})
	if _, err := s.ApplyClaims(ctx, []pgstore.Claim{claim(a.ID, a.packet(0), "u1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle(ctx, a.ID, t0, "open"); err != nil {
		t.Fatal(err)
	}
	b := open(t, s, 1002, 6001, []int64{40, 60})
	if _, err := s.ApplyClaims(ctx, []pgstore.Claim{claim(b.ID, b.packet(1), "u2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Suspend(ctx, b.ID, "redis lost it", t0); err != nil {
		t.Fatal(err)
	}
	if l := read(); l.Suspended != 1 {
		t.Errorf("suspended envelopes: %d, want 1", l.Suspended)
	}
	if _, err := s.Settle(ctx, b.ID, t0, "suspended"); err != nil { // flusher recover -action refund
		t.Fatal(err)
	}
	if _, err := s.Settle(ctx, b.ID, t0, "suspended"); err == nil {
		t.Fatal("settling a settled envelope again succeeded")
	}
	c := insert(t, s, 1003, 7001, []int64{5, 5}, t0)
	if _, err := s.FailLoading(ctx, c.ID, t0); err != nil {
		t.Fatal(err)
	}
	l := read()
	if got, want := l.Finished["settled"], (telemetry.Finished{Envelopes: 2, ClaimedCents: 100 + 60, RefundedCents: 500 + 40}); got != want {
		t.Errorf("settled totals %+v, want %+v", got, want)
	}
	if got, want := l.Finished["failed"], (telemetry.Finished{Envelopes: 1, RefundedCents: 10}); got != want {
		t.Errorf("failed totals %+v, want %+v", got, want)
	}
	if l.Suspended != 0 {
		t.Errorf("suspended envelopes after the refund: %d, want 0", l.Suspended)
	}
}

// An envelope past its expiry and not settled is overdue from its expiry;
// a suspended one is counted apart, a settled one not at all, and one not
// yet expired is not overdue.
func TestLedgerReportsTheOldestOverdueSettlement(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	overdue := func() time.Duration {
		t.Helper()
		l, err := s.Ledger(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		return l.SettlementOverdue
	}
	if got := overdue(); got != 0 {
		t.Fatalf("empty ledger: overdue %v, want 0", got)
	}
	open(t, s, 1001, 5001, []int64{100}) // expires in 2030
	if got := overdue(); got != 0 {
		t.Fatalf("an envelope not yet expired: overdue %v, want 0", got)
	}
	// Created 25 h ago, each expired an hour ago (its lifetime is a day).
	created := time.Now().Add(-25 * time.Hour)
	settled := insert(t, s, 1002, 6001, []int64{40}, created.Add(-time.Hour))
	if _, err := s.MarkLoaded(ctx, settled.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle(ctx, settled.ID, time.Now(), "open"); err != nil {
		t.Fatal(err)
	}
	suspended := insert(t, s, 1003, 7001, []int64{40}, created.Add(-2*time.Hour))
	if _, err := s.MarkLoaded(ctx, suspended.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Suspend(ctx, suspended.ID, "redis lost it", time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := overdue(); got != 0 {
		t.Fatalf("only settled and suspended envelopes past expiry: overdue %v, want 0", got)
	}
	waiting := insert(t, s, 1004, 8001, []int64{40}, created)
	if _, err := s.MarkLoaded(ctx, waiting.ID); err != nil {
		t.Fatal(err)
	}
	if got := overdue(); got < time.Hour-time.Minute || got > time.Hour+time.Minute {
		t.Fatalf("an open envelope expired an hour ago: overdue %v, want about 1h", got)
	}
}

// The totals run for the life of the service: once their cents pass
// int64's range (about a thousand envelopes of the largest total the
// service accepts), envelopes still settle, and the metrics still read.
func TestSettlementTotalsPastInt64StillSettle(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	const near = math.MaxInt64 - 100 // the sums of a long history
	if _, err := pool.Exec(ctx, `UPDATE settlement_totals SET envelopes = 1023, claimed_cents = $1, refunded_cents = $1`, int64(near)); err != nil {
		t.Fatal(err)
	}
	a := open(t, s, 1001, 5001, []int64{100, 200, 300})
	if _, err := s.ApplyClaims(ctx, []pgstore.Claim{claim(a.ID, a.packet(0), "u1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Settle(ctx, a.ID, t0, "open"); err != nil {
		t.Fatalf("settling with the totals near int64's end: %v", err)
	}
	l, err := s.Ledger(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	got := l.Finished["settled"]
	if want := float64(near) + 100; got.Envelopes != 1024 || got.ClaimedCents != want || got.RefundedCents != float64(near)+500 {
		t.Errorf("settled totals %+v, want 1024 envelopes, claimed %g, refunded %g", got, want, float64(near)+500)
	}
}

func TestLedgerCountsUndeliveredEventsOnlyWithWebhooks(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	open(t, s, 1001, 5001, []int64{100, 200, 300, 400, 500})
	// Events rows (claims without amounts go the guarded way), then a run.
	if _, err := s.ApplyClaims(ctx, []pgstore.Claim{claim(1001, 5001, "u1"), claim(1001, 5002, "u2")}); err != nil {
		t.Fatal(err)
	}
	apply(t, s, claim(1001, 5003, "u3"), claim(1001, 5004, "u4"), claim(1001, 5005, "u5"))
	if _, err := pool.Exec(ctx, `UPDATE events SET delivered_at = now() WHERE id = (SELECT min(id) FROM events)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE claim_event_runs SET delivered_through = first_position, delivered_at = now()`); err != nil {
		t.Fatal(err)
	}
	var undelivered int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM event_messages WHERE delivered_at IS NULL`).Scan(&undelivered); err != nil {
		t.Fatal(err)
	}
	if undelivered != 4 { // 2 of 3 claim events of the run, 1 row, and sold out
		t.Fatalf("%d events undelivered, want 4", undelivered)
	}
	for _, webhooks := range []bool{false, true} {
		l, err := s.Ledger(ctx, webhooks)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if webhooks {
			want = undelivered
		}
		if l.WebhookPending != want || undelivered < 2 {
			t.Errorf("webhooks %v: %d pending, want %d (of %d undelivered)", webhooks, l.WebhookPending, want, undelivered)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO audit_last_run (finished_at, violations, suspended, envelopes, all_envelopes)
		VALUES ($1, 3, 0, 10, false)`, t0); err != nil {
		t.Fatal(err)
	}
	l, err := s.Ledger(ctx, false)
	if err != nil || !l.Audit.FinishedAt.Equal(t0) || l.Audit.Violations != 3 {
		t.Errorf("last audit %+v, %v; want at %s, 3 violations", l.Audit, err, t0)
	}
}

// The conflict reasons the metrics create at zero are the ones the
// statement that records conflicts can write.
func TestConflictReasonsAreTheMetricsLabels(t *testing.T) {
	t.Parallel()
	var reasons []string
	for _, m := range regexp.MustCompile(`(?:THEN|ELSE) '([a-z_]+)'`).FindAllStringSubmatch(dbsqlc.RecordConflicts, -1) {
		reasons = append(reasons, m[1])
	}
	slices.Sort(reasons)
	want := slices.Sorted(slices.Values(telemetry.ConflictReasons))
	if !slices.Equal(reasons, want) {
		t.Errorf("recordConflicts writes reasons %v; telemetry.ConflictReasons is %v", reasons, want)
	}
}
