package events_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"redpacket/internal/envelope"
	"redpacket/internal/events"
	"redpacket/internal/pgstore"
)

// startListener runs a listener until the test ends and waits until it
// listens.
func startListener(t *testing.T, url string) (*events.Listener, context.CancelFunc) {
	t.Helper()
	l := events.NewListener(url, zaptest.NewLogger(t))
	listening := l.Changed()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-l.Done() })
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("listener not listening after 10s")
	}
	return l, cancel
}

// countingReader counts the reads, to show that a long poll does not poll.
type countingReader struct {
	events.Reader
	reads atomic.Int64
}

func (c *countingReader) EventsAfter(ctx context.Context, after int64, limit int) ([]pgstore.Event, error) {
	c.reads.Add(1)
	return c.Reader.EventsAfter(ctx, after, limit)
}

func ids(p events.Page) []int64 {
	out := make([]int64, len(p.Events))
	for i, m := range p.Events {
		out[i] = m.ID
	}
	return out
}

func TestFeedPages(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.openEnvelope(t, 1, 5)
	d.claimPackets(t, 1, 0, 5) // 5 claims and the sell-out
	f := events.NewFeed(d.Store, nil)
	var got []int64
	after := int64(0)
	for range 3 {
		p, err := f.Read(t.Context(), after, 2, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ids(p)...)
		if len(p.Events) != 2 || p.NextAfter != p.Events[1].ID {
			t.Fatalf("page after %d = %+v", after, p)
		}
		after = p.NextAfter
	}
	if len(got) != 6 || got[0] != 1 || got[5] != 6 {
		t.Errorf("read %v, want 1..6", got)
	}
	// At the end: nothing, and the cursor stays (no listener: no waiting).
	start := time.Now()
	p, err := f.Read(t.Context(), 6, 2, time.Minute)
	if err != nil || len(p.Events) != 0 || p.NextAfter != 6 || time.Since(start) > time.Second {
		t.Errorf("read at the end = %+v, %v after %s", p, err, time.Since(start))
	}
	last, _ := f.Read(t.Context(), 5, 10, 0)
	if len(last.Events) != 1 || last.Events[0].Type != envelope.EventEnvelopeSoldOut ||
		last.Events[0].EnvelopeID != 1 || last.Events[0].CreatedAt[len(last.Events[0].CreatedAt)-1] != 'Z' {
		t.Errorf("last event = %+v", last.Events)
	}
}

// A long poll waits without reading again until events commit, then answers
// them at once.
func TestFeedLongPollWakesOnCommit(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.openEnvelope(t, 1, 3)
	l, _ := startListener(t, d.url)
	r := &countingReader{Reader: d.Store}
	f := events.NewFeed(r, l)

	type answer struct {
		p    events.Page
		err  error
		took time.Duration
	}
	got := async(t, func() answer {
		start := time.Now()
		p, err := f.Read(t.Context(), 0, 100, 10*time.Second)
		return answer{p, err, time.Since(start)}
	})
	// The first read, however late the goroutine runs, then none while
	// nothing commits.
	for deadline := time.Now().Add(5 * time.Second); r.reads.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(700 * time.Millisecond)
	if n := r.reads.Load(); n != 1 {
		t.Errorf("%d reads while nothing committed, want 1", n)
	}
	committed := time.Now()
	d.claimPackets(t, 1, 0, 2)
	a := <-got
	if a.err != nil || len(a.p.Events) != 2 || a.p.NextAfter != 2 {
		t.Fatalf("long poll = %+v, %v", a.p, a.err)
	}
	if lag := time.Since(committed); lag > 2*time.Second {
		t.Errorf("answered %s after the commit", lag)
	}
	// A commit that adds nothing (a replay) does not end a wait. The
	// replay commits from the test's goroutine, once the wait has read, so
	// it lands within the wait and no claim outlives the test.
	const wait = time.Second
	readsBefore := r.reads.Load()
	got = async(t, func() answer {
		start := time.Now()
		p, err := f.Read(t.Context(), 2, 100, wait)
		return answer{p, err, time.Since(start)}
	})
	waitFor(t, 5*time.Second, "the waiting read's first read", func() bool { return r.reads.Load() > readsBefore })
	d.claimPackets(t, 1, 0, 2)
	if a := <-got; a.err != nil || len(a.p.Events) != 0 || a.p.NextAfter != 2 || a.took < wait {
		t.Errorf("wait over a replay = %+v, %v after %s, want nothing after %s", a.p, a.err, a.took, wait)
	}
}

// async runs f on a goroutine of its own and returns the channel of its
// result. The test's cleanup waits for it (t.Context ends first, which ends
// f's waits), so that a test that fails early leaves nothing running; f
// reports its failure in its result: it must not call t.Fatal.
func async[T any](t *testing.T, f func() T) <-chan T {
	out := make(chan T, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		out <- f()
	}()
	t.Cleanup(func() { <-done })
	return out
}

// A long poll ends early when the daemon shuts down (the listener stops) or
// the client goes away.
func TestFeedLongPollEnds(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	l, stopListener := startListener(t, d.url)
	f := events.NewFeed(d.Store, l)

	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	if _, err := f.Read(ctx, 0, 10, 20*time.Second); !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Errorf("read whose client went away = %v after %s", err, time.Since(start))
	}

	time.AfterFunc(200*time.Millisecond, stopListener)
	start = time.Now()
	p, err := f.Read(t.Context(), 0, 10, 20*time.Second)
	if err != nil || len(p.Events) != 0 || time.Since(start) > 5*time.Second {
		t.Errorf("read at shutdown = %+v, %v after %s", p, err, time.Since(start))
	}
}

// The listener's connection is cut: it connects again, and a waiting long
// poll is answered when events commit afterwards.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.openEnvelope(t, 1, 2)
	l, _ := startListener(t, d.url)
	r := &countingReader{Reader: d.Store}
	f := events.NewFeed(r, l)
	reconnected := l.Changed()
	if n := d.count(t, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE '%LISTEN redpacket_events%' AND pid <> pg_backend_pid()`); n != 1 {
		t.Fatalf("terminated %d listening backends, want 1", n)
	}
	select {
	case <-reconnected: // woken when listening again
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not reconnect within 10s")
	}
	type answer struct {
		p   events.Page
		err error
	}
	got := async(t, func() answer {
		p, err := f.Read(t.Context(), 0, 10, 10*time.Second)
		return answer{p, err}
	})
	// Commit once the poll has read and found nothing, however late it
	// runs: it is answered by the wake, not by its first read.
	waitFor(t, 5*time.Second, "the long poll's first read", func() bool { return r.reads.Load() > 0 })
	d.claimPackets(t, 1, 0, 1)
	select {
	case a := <-got:
		if a.err != nil || len(a.p.Events) != 1 {
			t.Errorf("after reconnecting, read %+v, %v", a.p, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll not answered 5s after a commit")
	}
}

// A listener that cannot connect (its database refuses it) hears no
// commit: a long poll is still answered with the events committed while it
// waits, at the listener's next try (it waited out its whole wait, and
// answered nothing).
func TestFeedLongPollWhileTheListenerIsDown(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.openEnvelope(t, 1, 2)
	l := events.NewListener("postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1", zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-l.Done() })
	r := &countingReader{Reader: d.Store}
	f := events.NewFeed(r, l)
	got := async(t, func() events.Page {
		p, err := f.Read(t.Context(), 0, 10, 20*time.Second)
		if err != nil {
			t.Error(err)
		}
		return p
	})
	waitFor(t, 5*time.Second, "the long poll's first read", func() bool { return r.reads.Load() > 0 })
	d.claimPackets(t, 1, 0, 1)
	select {
	case p := <-got:
		if len(p.Events) == 0 {
			t.Error("long poll with the listener down: no events, want the one committed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("long poll not answered 10s after a commit with the listener down")
	}
}

// laterReader has no event at its first read, and one from then on: a
// commit the listener did not hear.
type laterReader struct{ reads atomic.Int64 }

func (r *laterReader) EventsAfter(context.Context, int64, int) ([]pgstore.Event, error) {
	if r.reads.Add(1) == 1 {
		return nil, nil
	}
	return []pgstore.Event{{ID: 7, EnvelopeID: 1, Type: "packet.claimed"}}, nil
}

// A long poll reads again at its deadline: an event committed unheard while
// it waited is answered then (it answered nothing).
func TestFeedLongPollReadsAgainAtItsDeadline(t *testing.T) {
	t.Parallel()
	l := events.NewListener("postgres://unused", zaptest.NewLogger(t)) // never run: it hears nothing
	p, err := events.NewFeed(&laterReader{}, l).Read(t.Context(), 0, 10, 100*time.Millisecond)
	if err != nil || len(p.Events) != 1 || p.NextAfter != 7 {
		t.Fatalf("long poll past its deadline = %+v, %v; want the event read again at the deadline", p, err)
	}
}
