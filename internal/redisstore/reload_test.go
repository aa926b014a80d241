package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
)

// suspendedCase is an envelope suspended with claims, as PostgreSQL would
// hold them, and what a reload is given.
type suspendedCase struct {
	s     *redisstore.Store
	id    int64
	n     int
	total int64
	held  []redisstore.HeldClaim
	pool  []redisstore.Packet
}

// reload is the operator's reload of the envelope.
func (c suspendedCase) reload(ctx context.Context) error {
	return c.s.Reload(ctx, c.id, time.Now().Add(time.Hour), c.total, c.n, c.held, c.pool, redisstore.Gates{})
}

// suspendedWithClaims loads an envelope of n packets, suspends it, and
// returns it with the claims PostgreSQL would hold of its first claimed
// packets (users u0, u1, ...) and the packets nobody claimed.
func suspendedWithClaims(t *testing.T, s *redisstore.Store, id int64, n, claimed int) suspendedCase {
	t.Helper()
	ps, total := makePackets(1, n)
	if loaded, err := s.LoadEnvelope(t.Context(), id, time.Now().Add(time.Hour), total, ps); err != nil || !loaded {
		t.Fatalf("LoadEnvelope = %v, %v", loaded, err)
	}
	if _, err := s.Suspend(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	return suspendedCase{s: s, id: id, n: n, total: total, held: heldClaims(ps, claimed), pool: ps[claimed:]}
}

// heldClaims are claims of the first claimed packets of ps, by users u0,
// u1, ...
func heldClaims(ps []redisstore.Packet, claimed int) []redisstore.HeldClaim {
	at := time.UnixMilli(time.Now().UnixMilli())
	held := make([]redisstore.HeldClaim, claimed)
	for i := range held {
		held[i] = redisstore.HeldClaim{UserID: "u" + strconv.Itoa(i), Claim: redisstore.Claim{
			PacketID: ps[i].ID, AmountCents: ps[i].AmountCents, GrabbedAt: at, OrderNo: fmt.Sprintf("2026112900%08d", i),
		}}
	}
	return held
}

// wantReloaded checks an envelope Reload opened: every holder repeats, the
// pool is the packets nobody claimed, in order, and nothing of the reload
// (its staging, its fields in the meta, a lifetime) is left.
func wantReloaded(t *testing.T, s *redisstore.Store, rdb redis.UniversalClient, id int64, held []redisstore.HeldClaim, pool []redisstore.Packet) {
	t.Helper()
	ctx := t.Context()
	k := s.Keys()
	meta := rdb.HGetAll(ctx, k.Meta(id)).Val()
	if meta["status"] != "open" || meta["claimed"] != strconv.Itoa(len(held)) || meta["reloading"] != "" || meta["reloaded_claims"] != "" {
		t.Errorf("meta after the reload = %v; want open, %d claimed, nothing of the reload", meta, len(held))
	}
	for _, key := range []string{k.Meta(id), k.Pool(id)} {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl != -1 {
			t.Errorf("%s expires in %v; want it kept until settled", key, ttl)
		}
	}
	got := lrange(t, rdb, k.Pool(id))
	if len(got) != len(pool) {
		t.Fatalf("pool holds %d packets, want %d", len(got), len(pool))
	}
	for i, p := range pool {
		if want := fmt.Sprintf("%d:%d", p.ID, p.AmountCents); got[i] != want {
			t.Fatalf("pool[%d] = %q, want %q", i, got[i], want)
		}
	}
	for _, h := range held {
		c, err := s.Grab(ctx, id, h.UserID, time.Now())
		if err != nil || !c.Repeat || c.PacketID != h.PacketID || c.OrderNo != h.OrderNo {
			t.Fatalf("holder %s after the reload = %+v, %v; want the repeat of packet %d", h.UserID, c, err, h.PacketID)
		}
	}
	wantNoStaging(t, rdb, s, id)
}

// A large envelope's reload goes in steps no larger than a chunk, so that
// it does not hold Redis (every shard on it) for all its claims and
// packets; what it leaves is what PostgreSQL holds.
func TestReloadLargeEnvelopeInSteps(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	const id, n, claimed = 101, 12_000, 5_000
	c := suspendedWithClaims(t, s, id, n, claimed)
	h := &argsHook{}
	rdb.(*redis.Client).AddHook(h)
	if err := c.reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A chunk: 2,000 packets, or 500 claims of three arguments each.
	if h.most > 2_100 {
		t.Errorf("a command of the reload sent %d arguments; want each of its chunks' at most about 2,000", h.most)
	}
	wantReloaded(t, s, rdb, id, c.held, c.pool)
	if got, err := s.Grab(t.Context(), id, "newcomer", time.Now()); err != nil || got.Repeat || got.PacketID != c.pool[len(c.pool)-1].ID {
		t.Errorf("a new user after the reload = %+v, %v; want the pool's last packet (grabs pop from its end)", got, err)
	}
}

// A chunk of claims written twice (its reply lost, and sent again) is
// counted once: the reload opens the envelope.
func TestReloadClaimsWrittenTwice(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	const id, n, claimed = 102, 3_000, 2_500
	c := suspendedWithClaims(t, s, id, n, claimed)
	h := &argsHook{}
	type resent struct{}
	h.before = func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); cmd.Name() == "evalsha" && a[1] == redisstore.ReloadClaimsHash && ctx.Value(resent{}) == nil {
			rdb.Do(context.WithValue(ctx, resent{}, true), a...) // the first send, whose reply was lost
		}
		return nil
	}
	rdb.(*redis.Client).AddHook(h)
	if err := c.reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantReloaded(t, s, rdb, id, c.held, c.pool)
}

// A reload overtaken by another (a second operator's) changes nothing more
// once the other began: the envelope opens once, with PostgreSQL's state,
// and the first says Redis no longer shows it suspended.
func TestReloadOvertakenByAnother(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	const id, n, claimed = 103, 4_500, 1_000
	c := suspendedWithClaims(t, s, id, n, claimed)
	h := &argsHook{}
	var other error
	h.before = func(ctx context.Context, cmd redis.Cmder) error {
		if strings.Contains(scriptKey(cmd, 4), ":staging:") && other == nil { // the first's last step
			h.stop()
			other = c.reload(ctx)
			if other == nil {
				other = errors.New("none")
			}
		}
		return nil
	}
	rdb.(*redis.Client).AddHook(h)
	err := c.reload(t.Context())
	if !errors.Is(err, redisstore.ErrNotSuspended) || other == nil || other.Error() != "none" {
		t.Fatalf("overtaken reload = %v, the other's = %v; want ErrNotSuspended and the other done", err, other)
	}
	wantReloaded(t, s, rdb, id, c.held, c.pool)
}

// Staged packets gone before the last step (the list expired, or Redis
// lost it) open nothing: the envelope stays suspended for the next reload.
func TestReloadStagedPacketsLost(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	const id, n, claimed = 104, 3_000, 100
	c := suspendedWithClaims(t, s, id, n, claimed)
	h := &argsHook{}
	h.before = func(ctx context.Context, cmd redis.Cmder) error {
		if key := scriptKey(cmd, 4); strings.Contains(key, ":staging:") {
			rdb.Del(ctx, key)
		}
		return nil
	}
	rdb.(*redis.Client).AddHook(h)
	err := c.reload(t.Context())
	if !errors.Is(err, redisstore.ErrUnstaged) {
		t.Fatalf("Reload = %v, want ErrUnstaged", err)
	}
	if st := rdb.HGet(t.Context(), s.Keys().Meta(id), "status").Val(); st != "suspended" {
		t.Errorf("status after a reload that lost its packets = %q, want suspended", st)
	}
	h.stop()
	if err := c.reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantReloaded(t, s, rdb, id, c.held, c.pool)
}

// A reload of the forgotten meta a refund that stopped half-way left (it
// has a lifetime) makes it suspended for good: a reload that then stops
// before its last step leaves no claims behind that outlive their meta,
// and Live says a reload is under way.
func TestReloadOfAForgottenMetaStoppedHalfWay(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	const id, n, claimed = 105, 300, 80
	c := suspendedWithClaims(t, s, id, n, claimed)
	if err := s.Forget(t.Context(), id, n, time.Hour); err != nil {
		t.Fatal(err)
	}
	h := &argsHook{}
	h.before = func(ctx context.Context, cmd redis.Cmder) error {
		if strings.Contains(scriptKey(cmd, 4), ":staging:") {
			return errors.New("i/o timeout") // the last step, unsent
		}
		return nil
	}
	rdb.(*redis.Client).AddHook(h)
	if err := c.reload(t.Context()); err == nil {
		t.Fatal("a reload whose last step failed reported no error")
	}
	k := s.Keys()
	if st, ttl := rdb.HGet(t.Context(), k.Meta(id), "status").Val(), rdb.PTTL(t.Context(), k.Meta(id)).Val(); st != "suspended" || ttl != -1 {
		t.Errorf("meta after the stopped reload: %q, expires in %v; want suspended, kept", st, ttl)
	}
	live, err := s.Live(t.Context(), id)
	if err != nil || !live.Reloading || live.ReloadedClaims != claimed {
		t.Errorf("Live after the stopped reload = %+v, %v; want a reload under way with %d claims written", live, err, claimed)
	}
	h.stop()
	if err := c.reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantReloaded(t, s, rdb, id, c.held, c.pool)
	if live, _ := s.Live(t.Context(), id); live.Reloading {
		t.Errorf("Live after the reload = %+v; want no reload under way", live)
	}
}

// Once a second reload has begun (its token in the meta), the first writes
// nothing more and opens nothing, whether it is between two chunks of
// claims or before its last step: its claims could be mixed with the
// second's. The envelope stays suspended, and a reload run after it opens
// it with PostgreSQL's state.
func TestReloadOvertakenStopsAtItsNextStep(t *testing.T) {
	t.Parallel()
	for name, overtake := range map[string]func(cmd redis.Cmder, claimChunks *int) bool{
		"between claim chunks": func(cmd redis.Cmder, claimChunks *int) bool {
			if a := cmd.Args(); cmd.Name() == "evalsha" && a[1] == redisstore.ReloadClaimsHash {
				*claimChunks++
				return *claimChunks == 2
			}
			return false
		},
		"before the last step": func(cmd redis.Cmder, _ *int) bool {
			return strings.Contains(scriptKey(cmd, 4), ":staging:")
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStore(t)
			const id, n, claimed = 106, 3_000, 1_200
			c := suspendedWithClaims(t, s, id, n, claimed)
			h := &argsHook{}
			chunks, began := 0, false
			h.before = func(ctx context.Context, cmd redis.Cmder) error {
				if !began && overtake(cmd, &chunks) {
					began = true
					if err := redisstore.BeginReload(ctx, s, id, n); err != nil {
						t.Errorf("the second reload's begin: %v", err)
					}
				}
				return nil
			}
			rdb.(*redis.Client).AddHook(h)
			err := c.reload(t.Context())
			if !began || !errors.Is(err, redisstore.ErrNotSuspended) {
				t.Fatalf("overtaken reload = %v (second begun: %v); want ErrNotSuspended", err, began)
			}
			if st := rdb.HGet(t.Context(), s.Keys().Meta(id), "status").Val(); st != "suspended" {
				t.Fatalf("status after the overtaken reload = %q, want suspended", st)
			}
			wantNoStaging(t, rdb, s, id)
			h.stop()
			if err := c.reload(t.Context()); err != nil {
				t.Fatal(err)
			}
			wantReloaded(t, s, rdb, id, c.held, c.pool)
		})
	}
}
