package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"redpacket/internal/pgstore"
)

// claimEventsLedger writes a ledger whose events are of both kinds: runs of
// claim events from appended batches of two envelopes, events rows from a
// batch sent guarded (a claim whose amount the grab did not carry) and from
// a sold-out envelope. It returns the claims in the order their events must
// come: envelope by envelope within a batch, grab order within an envelope,
// sold-out events after a batch's claims.
func claimEventsLedger(t *testing.T, s *pgstore.Store) []string {
	t.Helper()
	open(t, s, 1, 100, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	open(t, s, 2, 200, []int64{5, 5, 5, 5, 5, 5, 5, 5})
	c := func(env, p int64, ms int) pgstore.Claim {
		x := claim(env, p, fmt.Sprintf("u%d", p))
		x.ClaimedAt = t0.Add(time.Duration(ms) * time.Millisecond)
		return x
	}
	a := []pgstore.Claim{c(2, 200, 1), c(1, 100, 2), c(2, 201, 3), c(1, 101, 4), c(1, 102, 5)}
	apply(t, s, a...)
	want := []string{claimedEvent(a[1], 1), claimedEvent(a[3], 2), claimedEvent(a[4], 3),
		claimedEvent(a[0], 5), claimedEvent(a[2], 5)}

	guarded := c(1, 103, 6)
	if _, err := s.ApplyClaims(t.Context(), []pgstore.Claim{guarded}); err != nil { // no amount: guarded
		t.Fatal(err)
	}
	want = append(want, claimedEvent(guarded, 4))

	var b []pgstore.Claim
	for i := range int64(6) {
		b = append(b, c(2, 202+i, 10+int(i)))
	}
	b = append(b, c(1, 104, 20))
	apply(t, s, b...)
	want = append(want, claimedEvent(b[6], 5))
	for _, x := range b[:6] {
		want = append(want, claimedEvent(x, 5))
	}
	want = append(want, soldOutEvent(2, 8, 40, bestOf(b[5], 5))) // ties: the later hand-out

	for _, p := range []int64{105, 106} { // two batches of one claim each
		x := c(1, p, 30+int(p))
		apply(t, s, x)
		want = append(want, claimedEvent(x, p-99))
	}
	return want
}

// The feed serves both kinds merged: positions 1, 2, 3, ... each once, and
// every page, from any position and of any size, is the same slice of the
// whole; event_messages (what DBAs read) shows the same events.
func TestFeedMergesClaimRunsAndEventRows(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	want := claimEventsLedger(t, s)
	if runs := count(t, pool, `SELECT count(*) FROM claim_event_runs`); runs != 6 {
		t.Fatalf("%d runs of claim events, want 6 (2 + 2 + 1 + 1)", runs)
	}
	all := allEvents(t, s)
	got := make([]string, len(all))
	for i, e := range all {
		if e.ID != int64(i+1) {
			t.Fatalf("event %d has position %d", i, e.ID)
		}
		got[i] = fmt.Sprintf("%s %d %s", e.Type, e.EnvelopeID, canonical(t, e.Data))
	}
	wantEvents(t, got, want...)

	for after := range int64(len(all) + 1) {
		for _, size := range []int{1, 2, 3, 7, 100} {
			page, err := s.EventsAfter(t.Context(), after, size)
			if err != nil {
				t.Fatal(err)
			}
			end := min(int(after)+size, len(all))
			if !slices.EqualFunc(page, all[after:end], func(a, b pgstore.Event) bool {
				return a.ID == b.ID && string(a.Data) == string(b.Data)
			}) {
				t.Fatalf("page after %d of %d: %v, want positions %d..%d", after, size, ids(page), after+1, end)
			}
		}
	}

	rows, err := pool.Query(t.Context(), `SELECT id, data FROM event_messages ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	view, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		ID   int64
		Data []byte
	}])
	if err != nil {
		t.Fatal(err)
	}
	if len(view) != len(all) {
		t.Fatalf("event_messages holds %d events, the feed %d", len(view), len(all))
	}
	for i, v := range view {
		if v.ID != all[i].ID || canonical(t, v.Data) != canonical(t, all[i].Data) {
			t.Errorf("event_messages %d: %d %s, feed: %d %s", i, v.ID, v.Data, all[i].ID, all[i].Data)
		}
	}
}

func ids(evs []pgstore.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// Webhook delivery walks a run's claim events one at a time, in order: only
// an envelope's first undelivered event is offered, a failure holds its
// run's next event back with the run's retry columns, and each delivery
// moves the run on by one.
func TestDeliverWalksClaimRuns(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	claimEventsLedger(t, s)
	ctx := t.Context()
	next := func(env int64) int64 {
		t.Helper()
		id, err := s.NextUndelivered(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	// Envelope 1: 1, 2, 3 (run), 6 (row), 7 (run), 15, 16 (runs).
	if id := next(1); id != 1 {
		t.Fatalf("envelope 1's first undelivered event = %d, want 1", id)
	}
	retry := func(int) time.Duration { return time.Hour }
	var sent []int64
	send := func(_ context.Context, e pgstore.Event) error { sent = append(sent, e.ID); return nil }
	if d, _, err := s.Deliver(ctx, 2, time.Second, send, retry); err != nil || d != pgstore.DeliverySkipped {
		t.Fatalf("deliver 2 before 1 = %v, %v; want skipped", d, err)
	}
	fail := func(context.Context, pgstore.Event) error { return errors.New("receiver down") }
	if d, _, err := s.Deliver(ctx, 1, time.Second, fail, retry); err != nil || d != pgstore.DeliveryFailed {
		t.Fatalf("failed delivery of 1 = %v, %v", d, err)
	}
	if n := count(t, pool, `SELECT count(*) FROM event_messages WHERE id = 1 AND attempts = 1 AND next_attempt_at > now()`); n != 1 {
		t.Fatal("the failed attempt is not on event 1")
	}
	if d, _, err := s.Deliver(ctx, 1, time.Second, send, retry); err != nil || d != pgstore.DeliverySkipped {
		t.Fatalf("deliver 1 in its backoff = %v, %v; want skipped", d, err)
	}
	if _, err := pool.Exec(ctx, `UPDATE claim_event_runs SET next_attempt_at = now() WHERE first_position = 1`); err != nil {
		t.Fatal(err)
	}
	for id := next(1); id != 0; id = next(1) {
		if d, _, err := s.Deliver(ctx, id, time.Second, send, retry); err != nil || d != pgstore.Delivered {
			t.Fatalf("deliver %d = %v, %v", id, d, err)
		}
	}
	if want := []int64{1, 2, 3, 6, 7, 15, 16}; !slices.Equal(sent, want) {
		t.Errorf("envelope 1's events sent %v, want %v", sent, want)
	}
	if n := count(t, pool, `SELECT count(*) FROM event_messages WHERE envelope_id = 1 AND delivered_at IS NULL`); n != 0 {
		t.Errorf("%d of envelope 1's events not recorded delivered", n)
	}
	heads, err := s.DeliveryHeads(ctx, 0, nil, 10)
	if err != nil || len(heads) != 1 || heads[0].EnvelopeID != 2 || heads[0].ID != 4 {
		t.Fatalf("delivery heads = %+v, %v; want envelope 2's event 4", heads, err)
	}
	// The sender stops while the receiver accepts event 4: its delivery is
	// recorded, not sent again after the restart.
	stopping, stop := context.WithCancel(ctx)
	accepted := func(context.Context, pgstore.Event) error { stop(); return nil }
	if d, _, err := s.Deliver(stopping, 4, time.Second, accepted, retry); err != nil || d != pgstore.Delivered {
		t.Errorf("delivery of 4 accepted as the sender stopped = %v, %v; want delivered", d, err)
	}
	if n := count(t, pool, `SELECT count(*) FROM event_messages WHERE id = 4 AND delivered_at IS NOT NULL`); n != 1 {
		t.Error("event 4, accepted, not recorded delivered")
	}
}
