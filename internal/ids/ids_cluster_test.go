package ids

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"redpacket/internal/pgstore"
	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// clusterShortEnv is a shortEnv whose two Redis clients are on the test
// Redis Cluster, as two processes of a clustered deployment would have.
func clusterShortEnv(t *testing.T) shortEnv {
	t.Helper()
	rdbA, prefix := testenv.RedisCluster(t)
	poolA, url := testenv.Postgres(t)
	poolB, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("second pool: %v", err)
	}
	t.Cleanup(poolB.Close)
	return shortEnv{keys: redisstore.NewKeys(prefix, 16), rdbA: rdbA, rdbB: testenv.NewClusterClient(t), poolA: poolA, poolB: poolB}
}

// Order numbers on a Redis Cluster: two grabber processes (two cluster
// clients) grab envelopes on all 16 shards, whose order hashes spread over
// the masters with the shards; ranges of 5, so raises run on every master.
// Every grant has its own number, of its shard's sequence.
func TestClusterOrderNumbers(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.RedisCluster(t)
	pool, _ := testenv.Postgres(t)
	ctx := t.Context()
	now := time.Now()
	date := now.UTC().Format("20060102")
	var stores []*redisstore.Store
	for _, c := range []redis.UniversalClient{rdb, testenv.NewClusterClient(t)} {
		s := redisstore.New(c, prefix, 16)
		// Ranges of 10: many raises, interleaved between the two stores;
		// at 5, a grab on a loaded machine could see the numbers of four
		// supplies in a row taken by others first, and give up.
		newOrders(t, s, pgstore.New(pool), OrderConfig{Step: 10})
		t.Cleanup(s.Coalesce(2, 16))
		stores = append(stores, s)
	}
	for id := int64(16); id < 32; id++ {
		loadEnvelope(t, stores[0], id, 30, now)
	}
	const perGoroutine, goroutines = 60, 8
	seen := newSet()
	var (
		wg     sync.WaitGroup
		failed atomic.Value
	)
	for g := range goroutines {
		wg.Go(func() {
			for i := range perGoroutine {
				id := int64(16 + (g*perGoroutine+i)%16)
				c, err := stores[i%2].Grab(ctx, id, fmt.Sprintf("u%d-%d", g, i), now)
				if err == nil && !seen.add(c.OrderNo) {
					err = fmt.Errorf("order number %q handed out twice", c.OrderNo)
				}
				if err == nil && int((seqOf(t, c.OrderNo, date, 10)-1)%16) != int(id%16) {
					err = fmt.Errorf("envelope %d got %s, not of its shard's sequence", id, c.OrderNo)
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
	if seen.len() != perGoroutine*goroutines {
		t.Fatalf("%d distinct order numbers, want %d", seen.len(), perGoroutine*goroutines)
	}
	masters := map[string]bool{}
	for shard := range 16 {
		n, err := rdb.(*redis.ClusterClient).MasterForKey(ctx, stores[0].Keys().Orders(shard, date))
		if err != nil {
			t.Fatal(err)
		}
		masters[n.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Errorf("the shards' order hashes are all on one master")
	}
}

// Share codes on a Redis Cluster: two generators race to create the pool
// and take a whole day's pool of 200, each code once, then ErrExhausted.
func TestClusterShareCodes(t *testing.T) {
	t.Parallel()
	e := clusterShortEnv(t)
	ctx := t.Context()
	clk := testenv.NewClock(time.Date(2031, 2, 3, 12, 0, 0, 0, time.UTC))
	const size = 200
	cfg := ShareConfig{Now: clk.Now}
	gens := []*ShareCodes{newShares(e.rdbA, e.keys, cfg, size), newShares(e.rdbB, e.keys, cfg, size)}
	checkDayCodes(t, drainShares(t, ctx, gens, 8), "310203", size)
	for _, s := range gens {
		if c, err := s.Next(ctx); !errors.Is(err, ErrExhausted) {
			t.Fatalf("Next after the pool = %q, %v; want ErrExhausted", c, err)
		}
	}
	checkDayTTL(t, e.rdbA, e.keys.ShareDay("310203"))
}

// Short ids on a Redis Cluster: two generators serve users asked for twice
// at about the same time, ids unique and stable; after the bitmap and its
// flag are lost, the bitmap is rebuilt from PostgreSQL (EXISTS of both keys,
// a pipeline of SETBIT) before any id is handed out again.
func TestClusterShortIDs(t *testing.T) {
	t.Parallel()
	e := clusterShortEnv(t)
	ctx := t.Context()
	cfg := ShortIDConfig{Min: 7000, Max: 7499}
	gens := e.gens(cfg)
	const users = 300
	var (
		got    sync.Map
		wg     sync.WaitGroup
		next   atomic.Int64
		failed atomic.Value
	)
	for g := range 16 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < 2*users; i = next.Add(1) - 1 {
				user := fmt.Sprintf("user-%d", i/2)
				id, err := gens[(int(i)+g)%2].Get(ctx, user)
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
	rows := checkBitmapMatchesPG(t, e, cfg.Min)
	if len(rows) != users {
		t.Fatalf("PostgreSQL holds %d short ids, want %d", len(rows), users)
	}

	if err := e.rdbA.Del(ctx, e.keys.ShortIDs(), e.keys.ShortIDsReady()).Err(); err != nil {
		t.Fatalf("delete the bitmap and its flag: %v", err)
	}
	used := map[int64]bool{}
	for _, id := range rows {
		used[id] = true
	}
	for i := range 20 {
		id := mustShort(t, ctx, gens[i%2], fmt.Sprint("new-", i))
		if used[id] {
			t.Fatalf("id %d handed out again after the bitmap was lost", id)
		}
		used[id] = true
		if i == 0 {
			checkBitmapMatchesPG(t, e, cfg.Min)
		}
	}
	if id := mustShort(t, ctx, gens[1], "user-7"); id != rows["user-7"] {
		t.Fatalf("user-7 after the loss: %d, before %d", id, rows["user-7"])
	}
	checkBitmapMatchesPG(t, e, cfg.Min)
}
