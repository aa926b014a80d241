package grab_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/apikey"
	"redpacket/internal/envelope"
	"redpacket/internal/grab"
	"redpacket/internal/limits"
	"redpacket/internal/reqctx"
	"redpacket/internal/testenv/stack"
)

// limited is a service over s's stores with the limits c.
func limited(s *stack.Stack, c limits.Config) *grab.Service {
	cfg := s.Config
	cfg.Safety.Limiter = limits.New(s.RDB, s.Redis.Keys(), c)
	return grab.New(cfg)
}

func mustCreate(t *testing.T, svc *grab.Service, ctx context.Context, total int64, count int64) grab.Envelope {
	t.Helper()
	e, err := svc.Create(ctx, envelope.CreateRequest{SenderID: "sender", TotalCents: total, Count: count})
	if err != nil {
		t.Fatalf("create %d/%d: %v", total, count, err)
	}
	return e
}

// USER_DAILY_GRABS on a Redis Cluster: users grabbing envelopes of several
// masters all at once receive exactly the cap, never more; grabs that took
// nothing (sold out) do not count; a holder's repeat is answered past the
// cap; and the next day counts anew.
func TestClusterUserDailyGrabsConcurrent(t *testing.T) {
	t.Parallel()
	s := stack.NewCluster(t)
	ctx := t.Context()
	const capPerDay, envelopes, users = 3, 8, 12
	svc := limited(s, limits.Config{UserDailyGrabs: capPerDay})
	es := envelopesOnSeveralMasters(t, s, svc, envelopes, users)
	// A sold-out envelope first: every refused grab gives its unit back.
	one := mustCreate(t, svc, ctx, 100, 1)
	for u := range users {
		_, _ = svc.Grab(ctx, one.ID, fmt.Sprint("u-", u))
	}
	got := grabAllUpToTheCap(t, svc, es, users)
	for u := range users {
		user := fmt.Sprint("u-", u)
		extra := 0
		if c, err := svc.Grab(ctx, one.ID, user); err == nil && c.Repeat {
			extra = 1 // the one packet of the first envelope
		}
		if n := len(got[user]) + extra; n != capPerDay {
			t.Errorf("%s received %d packets, want the cap %d", user, n, capPerDay)
		}
		// Repeats of what the user holds are answered; the rest refused.
		for _, e := range es {
			c, err := svc.Grab(ctx, e.ID, user)
			if p, ok := got[user][e.ID]; ok {
				if err != nil || !c.Repeat || c.PacketID != p {
					t.Errorf("%s repeats %d: %+v, %v; want packet %d again", user, e.ID, c, err, p)
				}
			} else if !errors.Is(err, limits.ErrExceeded) {
				t.Errorf("%s past the cap grabs %d: %+v, %v; want limit exceeded", user, e.ID, c, err)
			}
		}
	}
	s.Clock.Advance(24 * time.Hour)
	next := mustCreate(t, svc, ctx, 100, 1)
	if c, err := svc.Grab(ctx, next.ID, "u-1"); err != nil || c.Repeat {
		t.Errorf("the next day: %+v, %v; want a packet", c, err)
	}
}

// envelopesOnSeveralMasters creates n envelopes of count packets and fails
// the test unless they live on at least two masters.
func envelopesOnSeveralMasters(t *testing.T, s *stack.Stack, svc *grab.Service, n int, count int64) []grab.Envelope {
	t.Helper()
	ctx := t.Context()
	masters := map[string]bool{}
	var es []grab.Envelope
	for range n {
		e := mustCreate(t, svc, ctx, 10_000, count)
		es = append(es, e)
		node, err := s.RDB.(*redis.ClusterClient).MasterForKey(ctx, s.Redis.Keys().Meta(e.ID))
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("envelopes on %d masters, want several", len(masters))
	}
	return es
}

// grabAllUpToTheCap has each of users grab every envelope of es at once;
// each grab either takes a packet or is refused by the limit. It returns
// the packet each user took of each envelope.
func grabAllUpToTheCap(t *testing.T, svc *grab.Service, es []grab.Envelope, users int) map[string]map[int64]int64 {
	ctx := t.Context()
	var mu sync.Mutex
	got := map[string]map[int64]int64{} // user -> envelope -> packet
	var wg sync.WaitGroup
	for u := range users {
		for _, e := range es {
			wg.Go(func() {
				user := fmt.Sprint("u-", u)
				c, err := svc.Grab(ctx, e.ID, user)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil && !c.Repeat:
					if got[user] == nil {
						got[user] = map[int64]int64{}
					}
					got[user][e.ID] = c.PacketID
				case errors.Is(err, limits.ErrExceeded):
				default:
					t.Errorf("%s grabs %d: %+v, %v", user, e.ID, c, err)
				}
			})
		}
	}
	wg.Wait()
	return got
}

// USER_GRAB_RATE: a user's grabs across envelopes are refused past the rate
// with the time until the next token; a holder's repeat is answered even
// then; the bucket refills with time.
func TestUserGrabRate(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := t.Context()
	svc := limited(s, limits.Config{UserGrabRate: 2})
	var es []grab.Envelope
	for range 4 {
		es = append(es, mustCreate(t, svc, ctx, 1000, 10))
	}
	first, err := svc.Grab(ctx, es[0].ID, "u")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Grab(ctx, es[1].ID, "u"); err != nil {
		t.Fatal(err)
	}
	_, err = svc.Grab(ctx, es[2].ID, "u")
	var rl *limits.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 500*time.Millisecond || rl.RetryAfterSeconds() != 1 {
		t.Fatalf("third grab in the same instant: %v, want rate limited for 500ms", err)
	}
	if c, err := svc.Grab(ctx, es[0].ID, "u"); err != nil || !c.Repeat || c.PacketID != first.PacketID {
		t.Errorf("holder's repeat while limited: %+v, %v", c, err)
	}
	if _, err := svc.Grab(ctx, es[2].ID, "other-user"); err != nil {
		t.Errorf("another user: %v", err)
	}
	s.Clock.Advance(499 * time.Millisecond)
	if _, err := svc.Grab(ctx, es[2].ID, "u"); !errors.As(err, &rl) {
		t.Errorf("before a token is back: %v, want rate limited", err)
	}
	s.Clock.Advance(time.Millisecond)
	if c, err := svc.Grab(ctx, es[2].ID, "u"); err != nil || c.Repeat {
		t.Errorf("once a token is back: %+v, %v", c, err)
	}
}

// SENDER_DAILY_CENTS: creates past the sender's cents of the day are
// refused and count nothing; a refused or invalid create counts nothing; each
// client's senders are counted apart; the next day counts anew.
func TestSenderDailyCents(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	svc := limited(s, limits.Config{SenderDailyCents: 1000})
	ctx := t.Context()
	create := func(ctx context.Context, sender string, cents int64) error {
		_, err := svc.Create(ctx, envelope.CreateRequest{SenderID: sender, TotalCents: cents, Count: 1})
		return err
	}
	if err := create(ctx, "alice", 600); err != nil {
		t.Fatal(err)
	}
	if err := create(ctx, "alice", 500); !errors.Is(err, limits.ErrExceeded) {
		t.Fatalf("600+500 of 1000: %v, want limit exceeded", err)
	}
	if _, err := svc.Create(ctx, envelope.CreateRequest{SenderID: "alice", TotalCents: 400, Count: 0}); err == nil {
		t.Fatal("an invalid create was accepted")
	}
	if err := create(ctx, "alice", 400); err != nil {
		t.Errorf("600+400 of 1000: %v", err)
	}
	if err := create(ctx, "alice", 1); !errors.Is(err, limits.ErrExceeded) {
		t.Errorf("1000+1 of 1000: %v, want limit exceeded", err)
	}
	if err := create(ctx, "bob", 1000); err != nil {
		t.Errorf("another sender: %v", err)
	}
	info := reqctx.New("req", nil)
	info.Client, info.Scopes = "campaign-b", apikey.Scopes(apikey.ScopeCreate)
	if err := create(reqctx.With(ctx, info), "alice", 1000); err != nil {
		t.Errorf("alice of another client: %v", err)
	}
	s.Clock.Advance(24 * time.Hour)
	if err := create(ctx, "alice", 1000); err != nil {
		t.Errorf("the next day: %v", err)
	}
}

// Concurrent creates of one sender never pass the day's cents.
func TestSenderDailyCentsConcurrent(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	svc := limited(s, limits.Config{SenderDailyCents: 1000})
	var wg sync.WaitGroup
	var mu sync.Mutex
	made := 0
	for range 16 {
		wg.Go(func() {
			_, err := svc.Create(t.Context(), envelope.CreateRequest{SenderID: "alice", TotalCents: 300, Count: 1})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				made++
			case !errors.Is(err, limits.ErrExceeded):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if made != 3 {
		t.Errorf("%d creates of 300 within 1000 a day, want 3", made)
	}
}

// Grabs of a sold-out envelope are answered without touching the user's
// limits once the grabber has seen it sold out: a user tapping it again and
// again hears sold out, not rate limited, and keeps the grabs of the second
// and the day for envelopes with packets. If the envelope has packets again
// (its Redis state put back by an operator), the next grab is reserved and
// counted as any other.
func TestLimitedGrabsOfASoldOutEnvelope(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := t.Context()
	svc := limited(s, limits.Config{UserGrabRate: 1, UserDailyGrabs: 1})
	gone := mustCreate(t, svc, ctx, 100, 1)
	won, err := svc.Grab(ctx, gone.ID, "winner")
	if err != nil {
		t.Fatal(err)
	}
	// The first sold-out answer is a reserved grab: it takes late's token.
	if _, err := svc.Grab(ctx, gone.ID, "late"); !errors.Is(err, grab.ErrSoldOut) {
		t.Fatalf("late's grab: %v, want sold out", err)
	}
	for range 5 {
		if _, err := svc.Grab(ctx, gone.ID, "late"); !errors.Is(err, grab.ErrSoldOut) {
			t.Fatalf("late's grab again in the same instant: %v, want sold out", err)
		}
		if c, err := svc.Grab(ctx, gone.ID, "winner"); err != nil || !c.Repeat || c.PacketID != won.PacketID {
			t.Fatalf("winner's repeat: %+v, %v", c, err)
		}
	}
	open := mustCreate(t, svc, ctx, 100, 1)
	var rl *limits.RateLimitedError
	if _, err := svc.Grab(ctx, open.ID, "late"); !errors.As(err, &rl) {
		t.Fatalf("late's grab of an open envelope in the same second: %v, want rate limited", err)
	}
	s.Clock.Advance(time.Second)
	// Packets again: the grab goes the reserved way and uses the day.
	keys := s.Redis.Keys()
	if err := s.RDB.HSet(ctx, keys.Meta(gone.ID), "grabbed_cents", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.RDB.RPush(ctx, keys.Pool(gone.ID), fmt.Sprintf("%d:100", won.PacketID+1)).Err(); err != nil {
		t.Fatal(err)
	}
	if c, err := svc.Grab(ctx, gone.ID, "late"); err != nil || c.Repeat {
		t.Fatalf("late's grab of the envelope with a packet again: %+v, %v; want the packet", c, err)
	}
	s.Clock.Advance(time.Second)
	if _, err := svc.Grab(ctx, open.ID, "late"); !errors.Is(err, limits.ErrExceeded) {
		t.Errorf("late's second packet of the day: %v, want limit exceeded", err)
	}
}

// Grabs Redis answered without taking a packet give the day's unit back,
// though they are answered 503: a suspended envelope, and one PostgreSQL
// holds open but Redis does not. Under a cap of 2, a user refused so three
// times still receives two packets that day.
func TestLimitedGrabsAnsweredUnavailableCountNothing(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := t.Context()
	svc := limited(s, limits.Config{UserDailyGrabs: 2})
	suspended := mustCreate(t, svc, ctx, 100, 2)
	if _, err := s.Redis.Suspend(ctx, suspended.ID); err != nil {
		t.Fatal(err)
	}
	lost := mustCreate(t, svc, ctx, 100, 2)
	keys := s.Redis.Keys()
	if err := s.RDB.Del(ctx, keys.Meta(lost.ID), keys.Pool(lost.ID)).Err(); err != nil {
		t.Fatal(err)
	}
	for i, id := range []int64{suspended.ID, lost.ID, suspended.ID} {
		if _, err := svc.Grab(ctx, id, "u"); !errors.Is(err, grab.ErrUnavailable) {
			t.Fatalf("grab %d of an envelope Redis will not grant: %v, want unavailable", i, err)
		}
	}
	for range 2 {
		e := mustCreate(t, svc, ctx, 100, 1)
		if c, err := svc.Grab(ctx, e.ID, "u"); err != nil || c.Repeat {
			t.Fatalf("a packet within the cap after three unavailable grabs: %+v, %v", c, err)
		}
	}
	e := mustCreate(t, svc, ctx, 100, 1)
	if _, err := svc.Grab(ctx, e.ID, "u"); !errors.Is(err, limits.ErrExceeded) {
		t.Errorf("a third packet of the day: %v, want limit exceeded", err)
	}
}

// A grab reads the clock once: the day its reservation counts on is the day
// of its grant and order number. A clock that moves a millisecond at each
// reading, across midnight, cannot give a user capped at one packet a day
// two packets numbered on the same day.
func TestLimitedGrabAcrossMidnightCountsOnItsOwnDay(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	ctx := t.Context()
	cfg := s.Config
	open := mustCreate(t, grab.New(cfg), ctx, 200, 2)
	other := mustCreate(t, grab.New(cfg), ctx, 200, 2)
	day := s.Clock.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	var mu sync.Mutex
	tick := day.Add(-time.Millisecond) // 23:59:59.999, then 00:00:00.000, ...
	cfg.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now := tick
		tick = tick.Add(time.Millisecond)
		return now
	}
	cfg.Safety.Limiter = limits.New(s.RDB, s.Redis.Keys(), limits.Config{UserDailyGrabs: 1})
	svc := grab.New(cfg)
	var days []string
	for _, e := range []grab.Envelope{open, other} {
		c, err := svc.Grab(ctx, e.ID, "night-owl")
		if err != nil {
			t.Fatalf("grab of %d: %v", e.ID, err)
		}
		days = append(days, c.OrderNo[:8])
	}
	if days[0] == days[1] {
		t.Errorf("two packets numbered on day %s for a user capped at one a day", days[0])
	}
}
