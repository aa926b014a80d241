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
// when delivered is set.
func (d db) ageEvents(t *testing.T, from, to int64, age time.Duration, delivered bool) {
	t.Helper()
	_, err := d.pool.Exec(t.Context(), `UPDATE events SET created_at = now() - $3 * interval '1 second',
		delivered_at = CASE WHEN $4 THEN now() END WHERE id BETWEEN $1 AND $2`, from, to, age.Seconds(), delivered)
	if err != nil {
		t.Fatal(err)
	}
}

// With a webhook, only delivered events past the age go, a batch at a time;
// without one, every event past the age goes. Newer ones stay.
func TestRetention(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.openEnvelope(t, 1, 20)
	d.claimPackets(t, 1, 0, 20)                   // events 1-21
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
