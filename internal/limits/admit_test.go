package limits

import (
	"context"
	"errors"
	"strconv"
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

// Grabs that took nothing give their reservations back, many at once and
// each its own call: the day's count returns to zero and the whole cap is
// there again.
func TestReleaseGivesEveryReservationBack(t *testing.T) {
	t.Parallel()
	const callers = 200
	l, rdb, _ := newLimiter(t, Config{UserDailyGrabs: callers, UserGrabRate: 10 * callers})
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
	for i := range callers {
		if _, err := l.AdmitGrab(t.Context(), "", "carol", now); err != nil {
			t.Fatalf("grab %d of the cap after the releases: %v", i+1, err)
		}
	}
}

// Many users at once, half of them already at the day's cap, on one Redis
// and on a Redis Cluster (users on several masters): each reply reaches its
// own caller, so each user is admitted exactly up to the cap.
func TestAdmitGrabCoalescedRepliesReachTheirCallers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rdb  func(t testing.TB) (redis.UniversalClient, string)
	}{{"redis", testenv.Redis}, {"cluster", testenv.RedisCluster}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const users, perUser, capPerDay = 16, 12, 5
			rdb, prefix := tc.rdb(t)
			l := New(rdb, redisstore.NewKeys(prefix, 16), Config{UserDailyGrabs: capPerDay})
			now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
			user := func(u int) string { return "user-" + strconv.Itoa(u) }
			for u := 0; u < users; u += 2 {
				for range capPerDay {
					if _, err := l.AdmitGrab(t.Context(), "", user(u), now); err != nil {
						t.Fatal(err)
					}
				}
			}
			admitted := make([]atomic.Int64, users)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for u := range users {
				for range perUser {
					wg.Go(func() {
						<-start
						_, err := l.AdmitGrab(t.Context(), "", user(u), now)
						switch {
						case err == nil:
							admitted[u].Add(1)
						case !errors.Is(err, ErrExceeded):
							t.Error(err)
						}
					})
				}
			}
			close(start)
			wg.Wait()
			for u := range users {
				want := int64(capPerDay)
				if u%2 == 0 {
					want = 0
				}
				if got := admitted[u].Load(); got != want {
					t.Errorf("%s was admitted %d times, want %d", user(u), got, want)
				}
			}
		})
	}
}

// Reservations past the pipelines in flight wait; one whose caller leaves
// before a pipeline takes it is withdrawn (the caller's error, nothing
// reserved), and one that waits longer than admitQueueWait is refused the
// same way; the calls in flight are answered, and a caller that has
// already left sends nothing.
func TestAdmitGrabWithdrawnBeforeItIsSent(t *testing.T) {
	t.Parallel()
	l, rdb, rt := newLimiter(t, Config{UserDailyGrabs: 50})
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	gone, cancelGone := context.WithCancel(t.Context())
	cancelGone()
	if _, err := l.AdmitGrab(gone, "", "bob", now); !errors.Is(err, context.Canceled) {
		t.Errorf("a grab whose caller has left: %v, want context.Canceled", err)
	}
	hold := make(chan struct{})
	rt.hold.Store(&hold)
	inFlight := make(chan error, admitInFlight)
	for range admitInFlight {
		go func() {
			_, err := l.AdmitGrab(t.Context(), "", "bob", now)
			inFlight <- err
		}()
	}
	waitFor(t, func() bool { return rt.n.Load() == admitInFlight }) // every pipeline in flight, held
	ctx, cancel := context.WithCancel(t.Context())
	left := make(chan error, 1)
	go func() {
		_, err := l.AdmitGrab(ctx, "", "bob", now)
		left <- err
	}()
	waitFor(t, func() bool { l.admit.mu.Lock(); defer l.admit.mu.Unlock(); return len(l.admit.pending) == 1 })
	cancel()
	if err := receive(t, left); !errors.Is(err, context.Canceled) {
		t.Errorf("withdrawn grab: %v, want context.Canceled", err)
	}
	start := time.Now()
	if _, err := l.AdmitGrab(t.Context(), "", "bob", now); !errors.Is(err, errQueueWait) || time.Since(start) < admitQueueWait {
		t.Errorf("a grab no pipeline took for %v: %v, want errQueueWait after admitQueueWait", time.Since(start), err)
	}
	rt.hold.Store(nil)
	close(hold)
	for range admitInFlight {
		if err := receive(t, inFlight); err != nil {
			t.Errorf("a grab in flight: %v", err)
		}
	}
	if _, err := l.AdmitGrab(t.Context(), "", "bob", now); err != nil {
		t.Errorf("a later grab: %v", err)
	}
	n, err := rdb.Get(t.Context(), l.keys.UserDailyGrabs("", "bob", "20261127")).Int64()
	if err != nil || n != admitInFlight+1 {
		t.Errorf("the day's count is %d (%v), want %d: the withdrawn and refused grabs took nothing", n, err, admitInFlight+1)
	}
}

func receive(t *testing.T, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("no answer in 10 s")
		return nil
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
