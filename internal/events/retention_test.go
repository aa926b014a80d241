package events_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"redpacket/internal/events"
)

// countingPruner counts the statements a prune ran.
type countingPruner struct {
	events.PruneStore
	statements atomic.Int64
}

func (c *countingPruner) PruneEvents(ctx context.Context, cutoff time.Time, deliveredOnly bool, after int64, limit int) (
	int, int64, bool, error) {
	c.statements.Add(1)
	return c.PruneStore.PruneEvents(ctx, cutoff, deliveredOnly, after, limit)
}

// ageEvents makes events [from, to] look created age ago, and delivered
// when delivered is set: events rows, and the runs of claim events wholly
// inside the range.
func (d db) ageEvents(t *testing.T, from, to int64, age time.Duration, delivered bool) {
	t.Helper()
	_, err := d.pool.Exec(t.Context(), `UPDATE events SET created_at = now() - $3 * interval '1 second',
		delivered_at = CASE WHEN $4 THEN now() END WHERE id BETWEEN $1 AND $2`, from, to, age.Seconds(), delivered)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.pool.Exec(t.Context(), `UPDATE claim_event_runs SET created_at = now() - $3 * interval '1 second',
		delivered_through = CASE WHEN $4 THEN last_position ELSE first_position - 1 END,
		delivered_at = CASE WHEN $4 THEN now() END
		WHERE first_position >= $1 AND last_position <= $2`, from, to, age.Seconds(), delivered)
	if err != nil {
		t.Fatal(err)
	}
}

// Claim events go with their run, whole: only runs older than the age (and,
// with a webhook, delivered to their last event) are deleted, and the feed
// goes on from the first event left, without a gap inside it.
func TestRetentionPrunesWholeRuns(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.openEnvelope(t, 1, 20)
	for i := 0; i < 20; i += 5 {
		d.claimPackets(t, 1, i, i+5) // runs 1-5, 6-10, 11-15, 16-20; sold out: 21
	}
	d.ageEvents(t, 1, 10, 10*24*time.Hour, true)   // old, delivered
	d.ageEvents(t, 11, 15, 10*24*time.Hour, false) // old, not delivered
	// Old, delivered but for its last event: it stays with a webhook.
	if _, err := d.pool.Exec(t.Context(), `UPDATE claim_event_runs SET delivered_through = 19,
		created_at = now() - interval '10 days' WHERE first_position = 16`); err != nil {
		t.Fatal(err)
	}
	r := &events.Retention{Store: d.Store, Age: 7 * 24 * time.Hour, DeliveredOnly: true, Batch: 1}
	if n, err := r.Prune(t.Context()); err != nil || n != 10 {
		t.Fatalf("Prune = %d, %v; want the 10 events of the 2 old delivered runs", n, err)
	}
	wantFeed := func(from, to int64) {
		t.Helper()
		evs, err := d.EventsAfter(t.Context(), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range evs {
			if e.ID != from+int64(i) {
				t.Fatalf("feed after pruning: event %d has position %d, want %d", i, e.ID, from+int64(i))
			}
		}
		if len(evs) != int(to-from+1) {
			t.Fatalf("feed after pruning holds %d events, want %d..%d", len(evs), from, to)
		}
	}
	wantFeed(11, 21)
	r.DeliveredOnly = false
	if n, err := r.Prune(t.Context()); err != nil || n != 10 {
		t.Fatalf("Prune without a webhook = %d, %v; want the 10 events of the 2 old runs left", n, err)
	}
	wantFeed(21, 21)
}

// With a webhook, only delivered events past the age go, a batch at a time;
// without one, every event past the age goes. Newer ones stay.
func TestRetention(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.openEnvelope(t, 1, 20)
	d.claimPacketsAsRows(t, 1, 0, 20)             // events 1-21, rows
	d.ageEvents(t, 1, 8, 10*24*time.Hour, true)   // old, delivered
	d.ageEvents(t, 9, 12, 10*24*time.Hour, false) // old, not delivered
	d.ageEvents(t, 13, 16, time.Hour, true)       // new, delivered
	store := &countingPruner{PruneStore: d.Store}
	r := &events.Retention{Store: store, Age: 7 * 24 * time.Hour, DeliveredOnly: true, Batch: 3}
	n, err := r.Prune(t.Context())
	if err != nil || n != 8 {
		t.Fatalf("Prune = %d, %v; want 8 deleted", n, err)
	}
	if left := d.count(t, `SELECT count(*) FROM events`); left != 13 {
		t.Errorf("%d events left, want 13", left)
	}
	if old := d.count(t, `SELECT count(*) FROM events WHERE id <= 8`); old != 0 {
		t.Errorf("%d old delivered events left", old)
	}
	// Batches of 3 over events 1-13: the scan stops at the first new event.
	if s := store.statements.Load(); s != 5 {
		t.Errorf("%d statements, want 5 (stopping at the first event newer than the age)", s)
	}

	r.DeliveredOnly = false
	if n, err := r.Prune(t.Context()); err != nil || n != 4 {
		t.Fatalf("Prune without a webhook = %d, %v; want the 4 old undelivered ones", n, err)
	}
	if old := d.count(t, `SELECT count(*) FROM events WHERE id <= 12`); old != 0 {
		t.Errorf("%d old events left", old)
	}
	if n, err := r.Prune(t.Context()); err != nil || n != 0 {
		t.Errorf("Prune again = %d, %v", n, err)
	}
	if left := d.count(t, `SELECT count(*) FROM events`); left != 9 {
		t.Errorf("%d events left, want the 9 new ones", left)
	}
}

// Run prunes at start and on its ticker, and stops with its context.
func TestRetentionRun(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.openEnvelope(t, 1, 4)
	d.claimPackets(t, 1, 0, 4)
	d.ageEvents(t, 1, 5, 48*time.Hour, true)
	r := &events.Retention{Store: d.Store, Age: 24 * time.Hour, DeliveredOnly: true, Every: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	waitFor(t, 5*time.Second, "events pruned at start", func() bool { return d.count(t, `SELECT count(*) FROM events`) == 0 })
	d.claimPackets(t, 1, 0, 4) // a replay: nothing new
	d.openEnvelope(t, 2, 1)
	d.claimPackets(t, 2, 0, 1)
	d.ageEvents(t, 6, 7, 48*time.Hour, true)
	waitFor(t, 5*time.Second, "events pruned on the ticker", func() bool { return d.count(t, `SELECT count(*) FROM events`) == 0 })
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run still running 5s after its context ended")
	}
}
