package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/testenv"
)

// A grab that passed the stop check just before the stop and then found
// room in the queue is in no worker's hands: it is refused at once, not
// left waiting until its caller's deadline.
func TestGrabQueuedAsTheCoalescerStopsIsRefused(t *testing.T) {
	s := &Store{}
	stop := s.Coalesce(1, 4)
	c := s.coalescer
	stop()
	c.quit = make(chan struct{}) // as the late caller saw it; the workers are gone
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	r := c.grab(ctx, grabCall{})
	if !errors.Is(r.err, redis.ErrClosed) {
		t.Fatalf("grab queued after the stop = %v, want redis.ErrClosed", r.err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("grab queued after the stop answered after %v", d)
	}
}

// A grab whose caller left while it waited in the queue is not sent when a
// worker takes it: it takes no packet no one would be told about, and the
// grabs beside it are sent as usual.
func TestQueuedGrabOfAGoneCallerIsNotSent(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s := New(rdb, prefix, 4)
	newMemNumbering(s, 10, 1000, time.UTC)
	now := time.Now()
	packets := []Packet{{ID: 1, AmountCents: 5}, {ID: 2, AmountCents: 5}, {ID: 3, AmountCents: 5}}
	if ok, err := s.LoadEnvelope(t.Context(), 7, now.Add(time.Hour), 15, packets); err != nil || !ok {
		t.Fatalf("load = %v, %v", ok, err)
	}
	if _, err := s.Grab(t.Context(), 7, "first", now); err != nil { // supplies the shard's order numbers
		t.Fatal(err)
	}
	gone, leave := context.WithCancel(t.Context())
	leave()
	c := &coalescer{store: s}
	left := &pendingGrab{call: s.newGrab(7, "gone", now, 1), ctx: gone, reply: make(chan grabReply, 1)}
	here := &pendingGrab{call: s.newGrab(7, "here", now, 1), ctx: t.Context(), reply: make(chan grabReply, 1)}
	c.send([]*pendingGrab{left, here}, &callGroups{})
	if r := <-left.reply; !errors.Is(r.err, context.Canceled) || !TookNothing(r.err) {
		t.Errorf("grab of the gone caller = %v, want context.Canceled, nothing taken", r.err)
	}
	if r := <-here.reply; r.err != nil {
		t.Errorf("grab beside it = %v", r.err)
	}
	if n, err := rdb.LLen(t.Context(), s.keys.Pool(7)).Result(); err != nil || n != 1 {
		t.Errorf("pool holds %d packets (%v), want 1: only the caller still there took one", n, err)
	}
}

// A caller that leaves while its grab waits in the queue is told it was not
// sent (so a limited grab gives its reservation back), and the worker that
// takes it later does not send it.
func TestCallerLeavingTheQueueIsToldNotSent(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s := New(rdb, prefix, 4)
	newMemNumbering(s, 10, 1000, time.UTC)
	now := time.Now()
	if ok, err := s.LoadEnvelope(t.Context(), 7, now.Add(time.Hour), 5, []Packet{{ID: 1, AmountCents: 5}}); err != nil || !ok {
		t.Fatalf("load = %v, %v", ok, err)
	}
	// No worker runs yet: the grab waits in the queue until its caller leaves.
	c := &coalescer{store: s, in: make(chan *pendingGrab, 4), max: 4, quit: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	r := c.grab(ctx, s.newGrab(7, "left", now, 1))
	if !errors.Is(r.err, context.DeadlineExceeded) || !TookNothing(r.err) {
		t.Fatalf("caller that left the queue = %v, want DeadlineExceeded, nothing taken", r.err)
	}
	c.send([]*pendingGrab{<-c.in}, &callGroups{})
	if n, err := rdb.LLen(t.Context(), s.keys.Pool(7)).Result(); err != nil || n != 1 {
		t.Errorf("pool holds %d packets (%v), want 1: the grab of the caller that left was not sent", n, err)
	}
}

// A keyed create's mark is ended or renewed only by the create that set it:
// one that outlived its mark does not end or keep the next create's.
func TestCreateMarkEndedOnlyByItsCreate(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s := New(rdb, prefix, 4)
	ctx := t.Context()
	fp := make([]byte, 32)
	slow, err := s.MarkCreate(ctx, "c", "k", fp, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkCreate(ctx, "c", "k", fp, time.Minute); !errors.Is(err, ErrCreateUnderWay) {
		t.Fatalf("a second mark while the first holds: %v, want ErrCreateUnderWay", err)
	}
	other := make([]byte, 32)
	other[0] = 1
	if _, err := s.MarkCreate(ctx, "c", "k", other, time.Minute); !errors.Is(err, ErrCreateOtherBody) {
		t.Fatalf("a mark of another body: %v, want ErrCreateOtherBody", err)
	}
	// The slow create's mark expires (deleted, as its lifetime would).
	if err := rdb.Del(ctx, s.keys.CreateUnderWay("c", "k")).Err(); err != nil {
		t.Fatal(err)
	}
	next, err := s.MarkCreate(ctx, "c", "k", fp, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RenewCreateMark(ctx, "c", "k", slow, time.Minute); !errors.Is(err, ErrCreateMarkGone) {
		t.Errorf("the slow create renewing its old mark: %v, want ErrCreateMarkGone", err)
	}
	if err := s.UnmarkCreate(ctx, "c", "k", slow); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkCreate(ctx, "c", "k", fp, time.Minute); !errors.Is(err, ErrCreateUnderWay) {
		t.Errorf("after the slow create ended and renewed its old mark: %v, want the next create's still held", err)
	}
	if err := s.RenewCreateMark(ctx, "c", "k", next, time.Hour); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, s.keys.CreateUnderWay("c", "k")).Val(); ttl <= time.Minute {
		t.Errorf("renewed for an hour, the mark lives %s", ttl)
	}
	if err := s.UnmarkCreate(ctx, "c", "k", next); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkCreate(ctx, "c", "k", fp, time.Minute); err != nil {
		t.Errorf("after the next create ended its mark: %v", err)
	}
}
