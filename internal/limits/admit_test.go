package limits

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

func TestMain(m *testing.M) { testenv.VerifyNoLeaks(m) }

// roundTrips counts the commands and pipelines a client sends, and can hold
// them until let go.
type roundTrips struct {
	n    atomic.Int64
	hold atomic.Pointer[chan struct{}]
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.wait()
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.wait()
		return next(ctx, cmds)
	}
}

func (r *roundTrips) wait() {
	r.n.Add(1)
	if h := r.hold.Load(); h != nil {
		<-*h
	}
}

func newLimiter(t *testing.T, c Config) (*Limiter, redis.UniversalClient, *roundTrips) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	return New(rdb, redisstore.NewKeys(prefix, 16), c), rdb, rt
}

// Many grabs of one user at once: exactly the day's cap is admitted, every
// other grab is refused having taken nothing, and the grabs shared round
// trips (fewer than one each).
func TestAdmitGrabCoalescedKeepsTheCap(t *testing.T) {
	t.Parallel()
	const callers, capPerDay = 300, 37
	l, rdb, rt := newLimiter(t, Config{UserDailyGrabs: capPerDay})
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	var admitted, refused atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			<-start
			_, err := l.AdmitGrab(t.Context(), "", "alice", now)
			switch {
			case err == nil:
				admitted.Add(1)
			case errors.Is(err, ErrExceeded):
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	if admitted.Load() != capPerDay || refused.Load() != callers-capPerDay {
		t.Errorf("admitted %d, refused %d; want %d and %d", admitted.Load(), refused.Load(), capPerDay, callers-capPerDay)
	}
	n, err := rdb.Get(t.Context(), l.keys.UserDailyGrabs("", "alice", "20261127")).Int64()
	if err != nil || n != capPerDay {
		t.Errorf("the day's count is %d (%v), want %d", n, err, capPerDay)
	}
	if trips := rt.n.Load(); trips >= callers {
		t.Errorf("%d round trips for %d grabs arriving together: not coalesced", trips, callers)
	}
}

// Grabs that took nothing give their reservations back, many at once: the
// day's count returns to zero, the whole cap is there again, and the
// releases shared round trips with each other and the reservations.
func TestReleaseCoalescedGivesEveryReservationBack(t *testing.T) {
	t.Parallel()
	const callers = 200
	l, rdb, rt := newLimiter(t, Config{UserDailyGrabs: callers, UserGrabRate: 10 * callers})
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			<-start
			r, err := l.AdmitGrab(t.Context(), "", "carol", now)
			if err != nil {
				t.Error(err)
				return
			}
			if err := l.Release(t.Context(), r, false); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	n, err := rdb.Get(t.Context(), l.keys.UserDailyGrabs("", "carol", "20261127")).Int64()
	if err != nil || n != 0 {
		t.Errorf("the day's count after every grab gave its packet back is %d (%v), want 0", n, err)
	}
	if trips := rt.n.Load(); trips >= 2*callers {
		t.Errorf("%d round trips for %d reservations and releases arriving together: not coalesced", trips, 2*callers)
	}
	for i := range callers {
		if _, err := l.AdmitGrab(t.Context(), "", "carol", now); err != nil {
			t.Fatalf("grab %d of the cap after the releases: %v", i+1, err)
		}
	}
}

// A grab whose caller leaves while it waits for the call in flight is
// withdrawn: it returns the caller's error and reserves nothing, and the
// calls around it are answered.
func TestAdmitGrabWithdrawnBeforeItIsSent(t *testing.T) {
	t.Parallel()
	l, rdb, rt := newLimiter(t, Config{UserDailyGrabs: 5})
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	hold := make(chan struct{})
	rt.hold.Store(&hold)
	first := make(chan error, 1)
	go func() {
		_, err := l.AdmitGrab(t.Context(), "", "bob", now)
		first <- err
	}()
	waitFor(t, func() bool { return rt.n.Load() == 1 }) // the first call is in flight, held
	ctx, cancel := context.WithCancel(t.Context())
	second := make(chan error, 1)
	go func() {
		_, err := l.AdmitGrab(ctx, "", "bob", now)
		second <- err
	}()
	waitFor(t, func() bool { l.admit.mu.Lock(); defer l.admit.mu.Unlock(); return len(l.admit.pending) == 1 })
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Errorf("withdrawn grab: %v, want context.Canceled", err)
	}
	rt.hold.Store(nil)
	close(hold)
	if err := <-first; err != nil {
		t.Errorf("the grab in flight: %v", err)
	}
	if _, err := l.AdmitGrab(t.Context(), "", "bob", now); err != nil {
		t.Errorf("a later grab: %v", err)
	}
	n, err := rdb.Get(t.Context(), l.keys.UserDailyGrabs("", "bob", "20261127")).Int64()
	if err != nil || n != 2 {
		t.Errorf("the day's count is %d (%v), want 2: the withdrawn grab took nothing", n, err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
