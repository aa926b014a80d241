package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
)

func TestLoadEnvelope(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	const id = 42
	expires := time.UnixMilli(1_900_000_000_123)
	ps, total := makePackets(500, 10)

	loaded, err := s.LoadEnvelope(ctx, id, expires, total, ps)
	if err != nil || !loaded {
		t.Fatalf("first LoadEnvelope = %v, %v; want true, nil", loaded, err)
	}
	wantFreshLoad(t, s, rdb, id, total, ps)

	// Some grabs, then loading again (with other packets) changes nothing.
	now := expires.Add(-time.Minute)
	for u := range 3 {
		if _, err := s.Grab(ctx, id, fmt.Sprintf("u%d", u), now); err != nil {
			t.Fatalf("grab: %v", err)
		}
	}
	poolBefore := lrange(t, rdb, k.Pool(id))
	metaBefore, _ := rdb.HGetAll(ctx, k.Meta(id)).Result()
	// Fewer packets, as the flusher's repair loads an envelope some of
	// whose claims are written already: the same envelope.
	other, _ := makePackets(900, len(ps)-2)
	loaded, err = s.LoadEnvelope(ctx, id, expires, total, other)
	if err != nil || loaded {
		t.Fatalf("second LoadEnvelope = %v, %v; want false, nil", loaded, err)
	}
	// Another envelope under the id (ids handed out again) is refused, and
	// changes nothing either: an expiry or a total of its own.
	if err := rdb.Set(ctx, k.Epoch(k.Shard(id)), "e1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		expires time.Time
		total   int64
		ps      []redisstore.Packet
	}{{expires.Add(time.Millisecond), total, other}, {expires, total + 1, other}} {
		if loaded, err = s.LoadEnvelope(ctx, id, c.expires, c.total, c.ps); !errors.Is(err, redisstore.ErrOtherEnvelope) || loaded {
			t.Fatalf("LoadEnvelope of another envelope (expires %v, total %d, %d packets) = %v, %v; want ErrOtherEnvelope",
				c.expires, c.total, len(c.ps), loaded, err)
		}
		if _, err := s.Fail(ctx, "e1", id, len(c.ps), c.expires, c.total, time.Hour); !errors.Is(err, redisstore.ErrOtherEnvelope) {
			t.Fatalf("Fail of another envelope = %v, want ErrOtherEnvelope", err)
		}
	}
	// Giving it up finds it loaded, whatever count it was loaded with.
	if wasLoaded, err := s.Fail(ctx, "e1", id, len(ps)+5, expires, total, time.Hour); err != nil || !wasLoaded {
		t.Fatalf("Fail of the loaded envelope = %v, %v; want it found loaded", wasLoaded, err)
	}
	if got := lrange(t, rdb, k.Pool(id)); fmt.Sprint(got) != fmt.Sprint(poolBefore) || len(got) != 7 {
		t.Errorf("pool after second load = %v, want %v (7 packets)", got, poolBefore)
	}
	metaAfter, _ := rdb.HGetAll(ctx, k.Meta(id)).Result()
	if fmt.Sprint(metaAfter) != fmt.Sprint(metaBefore) {
		t.Errorf("meta after second load = %v, want %v", metaAfter, metaBefore)
	}
	if n := len(redisstore.ClaimsOf(ctx, s, id)); n != 3 {
		t.Errorf("claims after second load: %d, want 3", n)
	}
}

// wantFreshLoad checks what a first load of envelope id leaves: the
// packets ps in the pool in order, an open envelope's meta, and no claims.
func wantFreshLoad(t *testing.T, s *redisstore.Store, rdb redis.UniversalClient, id, total int64, ps []redisstore.Packet) {
	t.Helper()
	ctx := t.Context()
	k := s.Keys()
	pool := lrange(t, rdb, k.Pool(id))
	if len(pool) != len(ps) {
		t.Fatalf("pool holds %d packets, want %d", len(pool), len(ps))
	}
	for i, p := range ps {
		if want := fmt.Sprintf("%d:%d", p.ID, p.AmountCents); pool[i] != want {
			t.Errorf("pool[%d] = %q, want %q", i, pool[i], want)
		}
	}
	meta, err := rdb.HGetAll(ctx, k.Meta(id)).Result()
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := map[string]string{
		"status": "open", "expires": "1900000000123", "count": "10",
		"total": strconv.FormatInt(total, 10), "grabbed_cents": "0",
		"starts": "0", "password": "", "recipients": "0", "buckets": "1", "claimed": "0",
	}
	if fmt.Sprint(meta) != fmt.Sprint(wantMeta) {
		t.Errorf("meta = %v, want %v", meta, wantMeta)
	}
	if exists(t, rdb, k.Claims(id)) || exists(t, rdb, k.ClaimsBucket(id, 1, 0)) {
		t.Errorf("claims hash exists before any grab")
	}
}

func TestLoadEnvelopeInconsistent(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	ps, total := makePackets(1, 5)
	expires := time.Now().Add(time.Hour)

	t.Run("pool without meta", func(t *testing.T) {
		const id = 7
		if err := rdb.RPush(ctx, k.Pool(id), "99:3").Err(); err != nil {
			t.Fatal(err)
		}
		loaded, err := s.LoadEnvelope(ctx, id, expires, total, ps)
		if !errors.Is(err, redisstore.ErrInconsistent) || loaded {
			t.Fatalf("LoadEnvelope = %v, %v; want false, ErrInconsistent", loaded, err)
		}
		if got := lrange(t, rdb, k.Pool(id)); len(got) != 1 || got[0] != "99:3" {
			t.Errorf("pool changed to %v", got)
		}
		if exists(t, rdb, k.Meta(id)) || exists(t, rdb, k.Claims(id)) {
			t.Errorf("meta or claims written")
		}
	})
	t.Run("claims without meta", func(t *testing.T) {
		const id = 8
		if err := rdb.HSet(ctx, k.Claims(id), "alice", "5:3:1000").Err(); err != nil {
			t.Fatal(err)
		}
		loaded, err := s.LoadEnvelope(ctx, id, expires, total, ps)
		if !errors.Is(err, redisstore.ErrInconsistent) || loaded {
			t.Fatalf("LoadEnvelope = %v, %v; want false, ErrInconsistent", loaded, err)
		}
		if exists(t, rdb, k.Pool(id)) || exists(t, rdb, k.Meta(id)) {
			t.Errorf("pool or meta written")
		}
		if got, _ := rdb.HGetAll(ctx, k.Claims(id)).Result(); len(got) != 1 || got["alice"] != "5:3:1000" {
			t.Errorf("claims changed to %v", got)
		}
		// And such an envelope is not grabbable: no meta means not loaded.
		if _, err := s.Grab(ctx, id, "bob", time.Now()); !errors.Is(err, redisstore.ErrNotLoaded) {
			t.Errorf("grab = %v, want ErrNotLoaded", err)
		}
	})
}

func TestLoadEnvelopeLarge(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	const id, n = 77, 100_000
	ps, total := makePackets(1, n)
	loaded, err := s.LoadEnvelope(ctx, id, time.Now().Add(time.Hour), total, ps)
	if err != nil || !loaded {
		t.Fatalf("LoadEnvelope = %v, %v", loaded, err)
	}
	if got := llen(t, rdb, s.Keys().Pool(id)); got != n {
		t.Fatalf("pool length %d, want %d", got, n)
	}
	// Chunk edges keep order: first, around 1000, last.
	for _, i := range []int64{0, 999, 1000, 1001, n - 1} {
		v, err := rdb.LIndex(ctx, s.Keys().Pool(id), i).Result()
		if want := fmt.Sprintf("%d:%d", ps[i].ID, ps[i].AmountCents); err != nil || v != want {
			t.Errorf("pool[%d] = %q, %v; want %q", i, v, err, want)
		}
	}
	live, err := s.Live(ctx, id)
	if err != nil || !live.Loaded || live.Remaining != n || live.Status != "open" || live.GrabbedCents != 0 {
		t.Errorf("Live = %+v, %v", live, err)
	}
	if c, _ := rdb.HGet(ctx, s.Keys().Meta(id), "count").Result(); c != strconv.Itoa(n) {
		t.Errorf("meta count %q, want %d", c, n)
	}
}

// argsHook records the most arguments any one command sent and can run a
// step before each command; the step's error fails the command unsent.
type argsHook struct {
	mu     sync.Mutex
	most   int
	before func(ctx context.Context, cmd redis.Cmder) error
}

// stop ends the step run before each command.
func (h *argsHook) stop() {
	h.mu.Lock()
	h.before = nil
	h.mu.Unlock()
}

func (h *argsHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *argsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *argsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.most = max(h.most, len(cmd.Args()))
		before := h.before
		h.mu.Unlock()
		if before != nil {
			if err := before(ctx, cmd); err != nil {
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}

// scriptKey is KEYS[i] (1-based) of an EVAL or EVALSHA command, or "".
func scriptKey(cmd redis.Cmder, i int) string {
	a := cmd.Args()
	if len(a) < 3 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return ""
	}
	n, _ := strconv.Atoi(fmt.Sprint(a[2]))
	if i > n || 2+i >= len(a) {
		return ""
	}
	return fmt.Sprint(a[2+i])
}

// wantNoStaging checks that no staging list of envelope id is left, on
// every master of a cluster (KEYS asks one node).
func wantNoStaging(t *testing.T, rdb redis.UniversalClient, s *redisstore.Store, id int64) {
	t.Helper()
	pattern := s.Keys().Staging(id, "*")
	var mu sync.Mutex
	var keys []string
	look := func(ctx context.Context, c *redis.Client) error {
		found, err := c.Keys(ctx, pattern).Result()
		mu.Lock()
		keys = append(keys, found...)
		mu.Unlock()
		return err
	}
	var err error
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(t.Context(), look)
	} else {
		err = look(t.Context(), rdb.(*redis.Client))
	}
	if err != nil || len(keys) != 0 {
		t.Errorf("staging lists left: %v, %v", keys, err)
	}
}

// A large envelope goes into Redis a chunk at a time, so that no command
// holds Redis for all its packets; what it leaves is the envelope a single
// call would have left: the pool in order, for good, and no staging list.
func TestLoadEnvelopeStagedInChunks(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	h := &argsHook{}
	rdb.(*redis.Client).AddHook(h)
	const id, n = 91, 25_000
	ps, total := makePackets(1, n)
	loaded, err := s.LoadEnvelope(t.Context(), id, time.Now().Add(time.Hour), total, ps)
	if err != nil || !loaded {
		t.Fatalf("LoadEnvelope = %v, %v", loaded, err)
	}
	if h.most > 2_100 {
		t.Errorf("a command of the load sent %d arguments; want every chunk at most about 2,000 packets", h.most)
	}
	pool := lrange(t, rdb, s.Keys().Pool(id))
	if len(pool) != n {
		t.Fatalf("pool holds %d packets, want %d", len(pool), n)
	}
	for i, p := range ps {
		if want := fmt.Sprintf("%d:%d", p.ID, p.AmountCents); pool[i] != want {
			t.Fatalf("pool[%d] = %q, want %q", i, pool[i], want)
		}
	}
	if ttl := rdb.PTTL(t.Context(), s.Keys().Pool(id)).Val(); ttl != -1 {
		t.Errorf("pool expires in %v; want it kept until the envelope is settled", ttl)
	}
	wantNoStaging(t, rdb, s, id)
}

// Two loaders of one large envelope at once (its creator and the flusher's
// repair) stage into lists of their own: one loads, the other changes
// nothing, and the pool holds each packet once.
func TestLoadEnvelopeStagedTwiceAtOnce(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	const id, n = 92, 9_000
	ps, total := makePackets(1, n)
	expires := time.Now().Add(time.Hour) // both read it from the envelope's row
	var wg sync.WaitGroup
	results := make([]bool, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Go(func() {
			results[i], errs[i] = s.LoadEnvelope(t.Context(), id, expires, total, ps)
		})
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || results[0] == results[1] {
		t.Fatalf("loads = %v, %v and %v, %v; want one true, one false, no error", results[0], errs[0], results[1], errs[1])
	}
	pool := lrange(t, rdb, s.Keys().Pool(id))
	seen := map[string]bool{}
	for _, v := range pool {
		if seen[v] {
			t.Fatalf("packet %s in the pool twice", v)
		}
		seen[v] = true
	}
	if len(pool) != n {
		t.Errorf("pool holds %d packets, want %d", len(pool), n)
	}
	wantNoStaging(t, rdb, s, id)
}

// Staged packets gone before the load (the list expired, or Redis lost it)
// load nothing; a later load starts again and loads the envelope.
func TestLoadEnvelopeStagedPacketsLost(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	const id, n = 93, 5_000
	ps, total := makePackets(1, n)
	h := &argsHook{}
	h.before = func(ctx context.Context, cmd redis.Cmder) error {
		if key := scriptKey(cmd, 6); strings.Contains(key, ":staging:") {
			rdb.Del(ctx, key)
		}
		return nil
	}
	rdb.(*redis.Client).AddHook(h)
	loaded, err := s.LoadEnvelope(t.Context(), id, time.Now().Add(time.Hour), total, ps)
	if !errors.Is(err, redisstore.ErrUnstaged) || loaded {
		t.Fatalf("LoadEnvelope = %v, %v; want false, ErrUnstaged", loaded, err)
	}
	if exists(t, rdb, s.Keys().Meta(id)) || exists(t, rdb, s.Keys().Pool(id)) {
		t.Fatal("meta or pool written though the packets were lost")
	}
	h.stop()
	loaded, err = s.LoadEnvelope(t.Context(), id, time.Now().Add(time.Hour), total, ps)
	if err != nil || !loaded || llen(t, rdb, s.Keys().Pool(id)) != n {
		t.Fatalf("second LoadEnvelope = %v, %v with %d pooled; want true, nil, %d", loaded, err, llen(t, rdb, s.Keys().Pool(id)), n)
	}
}

// A load whose last call fails (a connection reset, a cluster's TRYAGAIN)
// leaves no staging list behind: the repair retries every few seconds, and
// each retry stages the whole envelope again.
func TestLoadEnvelopeFailedLoadDropsItsStaging(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	const id, n = 94, 5_000
	ps, total := makePackets(1, n)
	h := &argsHook{}
	h.before = func(ctx context.Context, cmd redis.Cmder) error {
		if strings.Contains(scriptKey(cmd, 6), ":staging:") {
			return errors.New("connection reset by peer")
		}
		return nil
	}
	rdb.(*redis.Client).AddHook(h)
	loaded, err := s.LoadEnvelope(t.Context(), id, time.Now().Add(time.Hour), total, ps)
	if err == nil || loaded {
		t.Fatalf("LoadEnvelope = %v, %v; want the load's error", loaded, err)
	}
	wantNoStaging(t, rdb, s, id)
}
