package ids

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// shortEnv is one test's PostgreSQL and Redis, with a second connection to
// each as a second process would have.
type shortEnv struct {
	keys         redisstore.Keys
	rdbA, rdbB   redis.UniversalClient
	poolA, poolB *pgxpool.Pool
}

func newShortEnv(t *testing.T) shortEnv {
	t.Helper()
	keys, rdbA, rdbB := twoClients(t)
	poolA, url := testenv.Postgres(t)
	poolB, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("second pool: %v", err)
	}
	t.Cleanup(poolB.Close)
	return shortEnv{keys: keys, rdbA: rdbA, rdbB: rdbB, poolA: poolA, poolB: poolB}
}

func (e shortEnv) gens(cfg ShortIDConfig) []*ShortIDs {
	return []*ShortIDs{
		NewShortIDs(e.rdbA, e.keys, e.poolA, cfg),
		NewShortIDs(e.rdbB, e.keys, e.poolB, cfg),
	}
}

func mustShort(t *testing.T, ctx context.Context, s *ShortIDs, user string) int64 {
	t.Helper()
	id, err := s.Get(ctx, user)
	if err != nil {
		t.Fatalf("Get(%q): %v", user, err)
	}
	return id
}

// pgShortIDs returns user -> short id of every row.
func pgShortIDs(t *testing.T, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT user_id, short_id FROM user_short_ids")
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]int64)
	var user string
	var id int64
	if _, err := pgx.ForEachRow(rows, []any{&user, &id}, func() error {
		m[user] = id
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return m
}

// bitmapIDs returns the ids whose bits are set.
func bitmapIDs(t *testing.T, rdb redis.UniversalClient, keys redisstore.Keys, minID int64) []int64 {
	t.Helper()
	raw, err := rdb.Get(context.Background(), keys.ShortIDs()).Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	var ids []int64
	for i, b := range raw {
		for b != 0 {
			bit := bits.LeadingZeros8(b) // Redis numbers bits from the most significant
			ids = append(ids, minID+int64(i*8+bit))
			b &^= 0x80 >> bit
		}
	}
	return ids
}

// checkBitmapMatchesPG asserts the bitmap's ids are exactly PostgreSQL's.
func checkBitmapMatchesPG(t *testing.T, e shortEnv, minID int64) map[string]int64 {
	t.Helper()
	rows := pgShortIDs(t, e.poolA)
	pg := make([]int64, 0, len(rows))
	for _, id := range rows {
		pg = append(pg, id)
	}
	slices.Sort(pg)
	if got := bitmapIDs(t, e.rdbA, e.keys, minID); !slices.Equal(got, pg) {
		t.Fatalf("bitmap holds %d ids, PostgreSQL %d; they differ", len(got), len(pg))
	}
	return rows
}

// TestShortIDsConcurrent: two generators (own Redis and PostgreSQL
// connections) serve 10,000 users, each asked for twice at about the same
// time; a user always gets the same id, ids are unique and in range, and
// the bitmap ends up holding exactly the ids of PostgreSQL.
func TestShortIDsConcurrent(t *testing.T) {
	t.Parallel()
	e := newShortEnv(t)
	ctx := t.Context()
	cfg := ShortIDConfig{Min: 1_000_000, Max: 1_014_999} // two thirds full at the end
	gens := e.gens(cfg)
	got := getTwiceRace(t, gens, cfg)
	wantDistinctIDs(t, got, shortRaceUsers)
	rows := checkBitmapMatchesPG(t, e, cfg.Min)
	for user, id := range rows {
		if want, _ := got.Load(user); want != id {
			t.Fatalf("PostgreSQL has %s -> %d, Get returned %v", user, id, want)
		}
	}
	// Asked again later, by either generator: the same id.
	for _, s := range gens {
		if id := mustShort(t, ctx, s, "user-7"); id != rows["user-7"] {
			t.Fatalf("user-7 again: %d, want %d", id, rows["user-7"])
		}
	}
}

// shortRaceUsers is how many users getTwiceRace asks ids for.
const shortRaceUsers = 10_000

// getTwiceRace asks ids for shortRaceUsers users from 32 goroutines, twice
// per user, from either generator; it fails on an id outside cfg's range or
// a user given two ids. It returns the ids given, user -> id.
func getTwiceRace(t *testing.T, gens []*ShortIDs, cfg ShortIDConfig) *sync.Map {
	t.Helper()
	ctx := t.Context()
	const (
		users      = shortRaceUsers
		goroutines = 32
	)
	var (
		got    sync.Map // user -> id
		wg     sync.WaitGroup
		next   atomic.Int64
		failed atomic.Value
	)
	for g := range goroutines {
		wg.Go(func() {
			// Two calls per user, from either generator: the first
			// calls of a user often race each other.
			for i := next.Add(1) - 1; i < 2*users; i = next.Add(1) - 1 {
				user := fmt.Sprintf("user-%d", i/2)
				id, err := gens[(int(i)+g)%2].Get(ctx, user)
				if err == nil && (id < cfg.Min || id > cfg.Max) {
					err = fmt.Errorf("id %d of %s outside the range", id, user)
				}
				if prev, loaded := got.LoadOrStore(user, id); err == nil && loaded && prev != id {
					err = fmt.Errorf("%s got %d and %d", user, prev, id)
				}
				if err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	return &got
}

// wantDistinctIDs checks that got, user -> id, holds an id for each of
// users users, no two alike.
func wantDistinctIDs(t *testing.T, got *sync.Map, users int) {
	t.Helper()
	byID := make(map[int64]string)
	got.Range(func(u, id any) bool {
		if other, dup := byID[id.(int64)]; dup {
			t.Fatalf("id %d given to %s and %s", id, other, u)
		}
		byID[id.(int64)] = u.(string)
		return true
	})
	if len(byID) != users {
		t.Fatalf("%d ids for %d users", len(byID), users)
	}
}

// TestShortIDsExhausted fills small ranges, including sizes that end inside
// a byte of the bitmap: every id of the range once, none outside it, then
// ErrExhausted.
func TestShortIDsExhausted(t *testing.T) {
	t.Parallel()
	for _, cfg := range []ShortIDConfig{
		{Min: 100, Max: 109}, // 10 ids: 2 in the last byte
		{Min: 100, Max: 115}, // 16: whole bytes
		{Min: 0, Max: 12},    // 13: 5 in the last byte
		{Min: 7, Max: 7},     // 1
	} {
		t.Run(fmt.Sprintf("%d-%d", cfg.Min, cfg.Max), func(t *testing.T) {
			t.Parallel()
			e := newShortEnv(t)
			ctx := t.Context()
			gens := e.gens(cfg)
			size := int(cfg.Max - cfg.Min + 1)
			var ids []int64
			for i := range size {
				ids = append(ids, mustShort(t, ctx, gens[i%2], fmt.Sprint("u", i)))
			}
			slices.Sort(ids)
			for i, id := range ids {
				if id != cfg.Min+int64(i) {
					t.Fatalf("ids %v: not each of %d..%d once", ids, cfg.Min, cfg.Max)
				}
			}
			for _, s := range gens {
				if id, err := s.Get(ctx, "one-too-many"); !errors.Is(err, ErrExhausted) {
					t.Fatalf("Get beyond the range = %d, %v; want ErrExhausted", id, err)
				}
			}
			// Known users are still served from PostgreSQL.
			if id := mustShort(t, ctx, gens[1], "u0"); id < cfg.Min || id > cfg.Max {
				t.Fatalf("u0 = %d after exhaustion", id)
			}
			checkBitmapMatchesPG(t, e, cfg.Min)
		})
	}
}

// TestShortIDsRedisLoss deletes the bitmap (and then also the flag), as a
// Redis restart without persistence would: the next Get rebuilds it from
// PostgreSQL, so no earlier id is handed out again, and known users keep
// theirs. The range is filled exactly, which only works if no bit was lost.
func TestShortIDsRedisLoss(t *testing.T) {
	t.Parallel()
	for _, lose := range []string{"bitmap and flag", "bitmap"} {
		t.Run(lose, func(t *testing.T) {
			t.Parallel()
			e := newShortEnv(t)
			ctx := t.Context()
			cfg := ShortIDConfig{Min: 500, Max: 549}
			gens := e.gens(cfg)
			before := make(map[string]int64)
			for i := range 30 {
				user := fmt.Sprint("old", i)
				before[user] = mustShort(t, ctx, gens[i%2], user)
			}
			keys := []string{e.keys.ShortIDs()}
			if lose == "bitmap and flag" {
				keys = append(keys, e.keys.ShortIDsReady())
			}
			if err := e.rdbA.Del(ctx, keys...).Err(); err != nil {
				t.Fatal(err)
			}

			used := make(map[int64]bool)
			for _, id := range before {
				used[id] = true
			}
			for i := range 20 {
				id := mustShort(t, ctx, gens[i%2], fmt.Sprint("new", i))
				if used[id] {
					t.Fatalf("id %d handed out again after the loss", id)
				}
				used[id] = true
				if i == 0 {
					// Rebuilt before the first new id, not healed
					// one conflict at a time by PostgreSQL's unique key.
					checkBitmapMatchesPG(t, e, cfg.Min)
				}
			}
			for user, id := range before {
				if got := mustShort(t, ctx, gens[1], user); got != id {
					t.Fatalf("%s: %d after the loss, %d before", user, got, id)
				}
			}
			if id, err := gens[0].Get(ctx, "extra"); !errors.Is(err, ErrExhausted) {
				t.Fatalf("51st user = %d, %v; want ErrExhausted", id, err)
			}
			checkBitmapMatchesPG(t, e, cfg.Min)
		})
	}
}

// TestShortIDStaleBitmap: ids in PostgreSQL that the bitmap does not know
// (written while a rebuild was reading) are turned down by the unique
// column, their bits set, and the user gets the one free id.
func TestShortIDStaleBitmap(t *testing.T) {
	t.Parallel()
	e := newShortEnv(t)
	ctx := t.Context()
	s := NewShortIDs(e.rdbA, e.keys, e.poolA, ShortIDConfig{Min: 100, Max: 109})
	first := mustShort(t, ctx, s, "first")
	free := int64(100 + (first-100+5)%10)
	for id := int64(100); id <= 109; id++ {
		if id != first && id != free {
			insertRow(t, e.poolA, fmt.Sprint("ghost", id), id)
		}
	}
	if id := mustShort(t, ctx, s, "second"); id != free {
		t.Fatalf("Get = %d, want the only free id %d", id, free)
	}
	if id, err := s.Get(ctx, "third"); !errors.Is(err, ErrExhausted) {
		t.Fatalf("Get on a full range = %d, %v; want ErrExhausted", id, err)
	}
	checkBitmapMatchesPG(t, e, 100)
}

func insertRow(t *testing.T, pool *pgxpool.Pool, user string, id int64) {
	t.Helper()
	if _, err := pool.Exec(context.Background(),
		"INSERT INTO user_short_ids (user_id, short_id) VALUES ($1, $2)", user, id); err != nil {
		t.Fatal(err)
	}
}

// TestShortIDUserConflict plays the race of two Gets of one user: the
// loser's id, in no row, goes back to the bitmap; one PostgreSQL holds for
// someone else stays set.
func TestShortIDUserConflict(t *testing.T) {
	t.Parallel()
	e := newShortEnv(t)
	ctx := t.Context()
	s := NewShortIDs(e.rdbA, e.keys, e.poolA, ShortIDConfig{Min: 100, Max: 199})
	mustShort(t, ctx, s, "warm-up") // builds the bitmap

	pick := func() int64 {
		t.Helper()
		offset, err := s.pick(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return offset
	}

	ours, theirs := pick(), pick()
	insertRow(t, e.poolA, "racer", 100+theirs) // the other Get won
	id, ok, err := s.claim(ctx, "racer", ours)
	if err != nil || !ok || id != 100+theirs {
		t.Fatalf("claim = %d, %t, %v; want the stored %d", id, ok, err, 100+theirs)
	}
	checkBitmapMatchesPG(t, e, 100) // our bit was cleared

	ours, theirs = pick(), pick()
	insertRow(t, e.poolA, "holder", 100+ours) // and the bitmap was stale
	insertRow(t, e.poolA, "racer2", 100+theirs)
	id, ok, err = s.claim(ctx, "racer2", ours)
	if err != nil || !ok || id != 100+theirs {
		t.Fatalf("claim = %d, %t, %v; want the stored %d", id, ok, err, 100+theirs)
	}
	checkBitmapMatchesPG(t, e, 100) // the bit of an id in PostgreSQL stays set
}

func TestShortIDConfig(t *testing.T) {
	t.Parallel()
	s := NewShortIDs(nil, redisstore.Keys{}, nil, ShortIDConfig{})
	if s.min != defaultShortMin || s.bits != defaultShortMax-defaultShortMin+1 {
		t.Fatalf("default range %d + %d bits", s.min, s.bits)
	}
	for _, cfg := range []ShortIDConfig{{Min: -1, Max: 5}, {Min: 10, Max: 9}, {Min: 0, Max: 1 << 40}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("range %+v accepted", cfg)
				}
			}()
			NewShortIDs(nil, redisstore.Keys{}, nil, cfg)
		}()
	}
	if _, err := s.Get(context.Background(), ""); err == nil {
		t.Error("empty user id accepted")
	}
}
