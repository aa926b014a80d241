package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
	"redpacket/internal/testenv"
)

// newClusterStore returns a Store on the test Redis Cluster under a prefix
// of the test's own, and the cluster client.
func newClusterStore(t testing.TB, shards int) (*redisstore.Store, *redis.ClusterClient) {
	t.Helper()
	rdb, prefix := testenv.RedisCluster(t)
	return numbered(redisstore.New(rdb, prefix, shards)), rdb.(*redis.ClusterClient)
}

// masterOf is the address of the master serving key, from the client's
// slot map.
func masterOf(t testing.TB, c *redis.ClusterClient, key string) string {
	t.Helper()
	n, err := c.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatalf("master for %s: %v", key, err)
	}
	return n.Options().Addr
}

// masters returns the addresses of the cluster's masters.
func masters(t testing.TB, c *redis.ClusterClient) []string {
	t.Helper()
	var mu sync.Mutex
	var out []string
	if err := c.ForEachMaster(t.Context(), func(_ context.Context, n *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, n.Options().Addr)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// shardKeys is every key of a shard: its queues and the keys of an envelope
// of the shard.
func shardKeys(k redisstore.Keys, shard int) []string {
	e := int64(shard + 7*k.Shards())
	return []string{k.Consumed(shard), k.Inflight(shard), k.Rejected(shard), k.Meta(e), k.Pool(e), k.Claims(e), k.ClaimsBucket(e, 9, 8)}
}

// The 16 shards of a deployment spread over every master of the cluster, so
// that no node carries all grabs; each shard's keys, and the identifier keys,
// stay in one slot. The slot the server computes (CLUSTER KEYSLOT) matches
// the reference, and keys written through the client land on the master its
// slot map names.
func TestClusterShardTagsSpreadOverMasters(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.RedisCluster(t)
	c := rdb.(*redis.ClusterClient)
	all := masters(t, c)
	if len(all) < 3 {
		t.Fatalf("cluster has masters %v; the tests need at least 3", all)
	}
	for _, p := range []string{"rp", prefix} { // the default prefix, and a test's own
		wantShardTagsSpread(t, c, all, p)
	}
	wantKeysWhereSlotMapSays(t, c, prefix)
}

// wantShardTagsSpread checks that each shard's keys under prefix p share a
// slot, that the shards spread over the masters (all of them for the
// default prefix), and that the identifier keys share a slot.
func wantShardTagsSpread(t *testing.T, c *redis.ClusterClient, all []string, p string) {
	t.Helper()
	ctx := t.Context()
	k := redisstore.NewKeys(p, 16)
	shardsOn := map[string][]int{}
	for shard := range k.Shards() {
		keys := shardKeys(k, shard)
		slot, err := c.ClusterKeySlot(ctx, keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		if int(slot) != keySlot(keys[0]) {
			t.Fatalf("CLUSTER KEYSLOT %s = %d, reference says %d", keys[0], slot, keySlot(keys[0]))
		}
		for _, key := range keys[1:] {
			if s, err := c.ClusterKeySlot(ctx, key).Result(); err != nil || s != slot {
				t.Fatalf("CLUSTER KEYSLOT %s = %d, %v; the shard's %s is in slot %d", key, s, err, keys[0], slot)
			}
		}
		m := masterOf(t, c, keys[0])
		shardsOn[m] = append(shardsOn[m], shard)
	}
	t.Logf("prefix %q: shards per master %v", p, shardsOn)
	switch {
	case p == "rp" && len(shardsOn) != len(all):
		t.Errorf("the default prefix's 16 shards are on %d of the %d masters: %v", len(shardsOn), len(all), shardsOn)
	case len(shardsOn) < 2:
		t.Errorf("prefix %q: all 16 shards on one master: %v", p, shardsOn)
	}
	ids := []string{k.SharePool(), k.ShareDay("300101"), k.ShortIDs(), k.ShortIDsReady()}
	for _, key := range ids[1:] {
		if keySlot(key) != keySlot(ids[0]) {
			t.Errorf("identifier keys %s and %s are in different slots", ids[0], key)
		}
	}
}

// wantKeysWhereSlotMapSays checks where keys really land: it writes each
// shard's queue, then finds it by scanning each master.
func wantKeysWhereSlotMapSays(t *testing.T, c *redis.ClusterClient, prefix string) {
	t.Helper()
	ctx := t.Context()
	k := redisstore.NewKeys(prefix, 16)
	want := map[string]string{}
	for shard := range k.Shards() {
		key := k.Consumed(shard)
		if err := c.RPush(ctx, key, "x").Err(); err != nil {
			t.Fatal(err)
		}
		want[key] = masterOf(t, c, key)
	}
	var mu sync.Mutex
	got := map[string]string{}
	if err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		iter := n.Scan(ctx, 0, "*"+prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			got[iter.Val()] = n.Options().Addr
			mu.Unlock()
		}
		return iter.Err()
	}); err != nil {
		t.Fatal(err)
	}
	for key, m := range want {
		if got[key] != m {
			t.Errorf("%s is on %q; the slot map says %s", key, got[key], m)
		}
	}
}

// TestClusterGrabConcurrent races users over envelopes of every shard, on
// the cluster: exactly the packets loaded are granted, once each, a retry
// answers the first claim, the queues hold exactly the grants; then the
// flusher's calls (Pending across every slot, Take, Ack) drain them.
func TestClusterGrabConcurrent(t *testing.T) {
	t.Parallel()
	s, rdb := newClusterStore(t, testShards)
	ctx := t.Context()
	k := s.Keys()
	const (
		packets = 150
		users   = 400
	)
	now := time.Now()
	envelopes := []int64{41, 42, 43, 44} // one per shard
	byID := map[int64]map[int64]int64{}
	totals := map[int64]int64{}
	onMasters := map[string]bool{}
	for _, id := range envelopes {
		byID[id], totals[id] = load(t, s, id, packets, now)
		onMasters[masterOf(t, rdb, k.Meta(id))] = true
	}
	t.Logf("%d envelopes on %d masters", len(envelopes), len(onMasters))

	first, second := race(t, s, envelopes, users, now)
	for _, id := range envelopes {
		checkRace(t, s, rdb, id, first[id], second[id], byID[id], totals[id])
	}

	pending, err := s.Pending(ctx)
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	for shard, n := range pending {
		if n != packets {
			t.Fatalf("Pending = %v; want %d on every shard", pending, packets)
		}
		seen := map[int64]bool{}
		for {
			batch, err := s.Take(ctx, shard, 40)
			if err != nil {
				t.Fatal(err)
			}
			if len(batch) == 0 {
				break
			}
			for _, raw := range batch {
				q, err := redisstore.ParseQueued(raw)
				if err != nil || k.Shard(q.EnvelopeID) != shard || seen[q.PacketID] {
					t.Fatalf("shard %d queued %q (%v)", shard, raw, err)
				}
				seen[q.PacketID] = true
			}
			if acked, err := s.Ack(ctx, shard, batch, nil); err != nil || !acked {
				t.Fatal(acked, err)
			}
		}
		if len(seen) != packets {
			t.Fatalf("shard %d handed out %d claims, want %d", shard, len(seen), packets)
		}
	}
	if pending, err := s.Pending(ctx); err != nil || fmt.Sprint(pending) != "[0 0 0 0]" {
		t.Fatalf("Pending after the drain = %v, %v", pending, err)
	}
}

// Each shard's identity is that of the master holding it: shards on one
// master share it, shards on others differ, so one master's restart or
// failover is seen on its own shards (and an unreachable one holds up
// only its own).
func TestIdentitiesArePerMaster(t *testing.T) {
	t.Parallel()
	s, rdb := newClusterStore(t, 16)
	ids, err := s.Identities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for shard, id := range ids {
		m, err := rdb.MasterForKey(t.Context(), s.Keys().Consumed(shard))
		if err != nil {
			t.Fatal(err)
		}
		info, err := m.Info(t.Context(), "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		if id == "" || !strings.Contains(info, "master_replid:"+id+"\r\n") {
			t.Errorf("shard %d: identity %q, not its master's (%s)", shard, id, m.Options().Addr)
		}
	}
	if distinct := len(slices.Compact(slices.Sorted(slices.Values(ids)))); distinct < 2 {
		t.Errorf("16 shards over a cluster's masters have %d identities, want one per master", distinct)
	}
}

// A large envelope's staging list shares its envelope's hash tag, so the
// staged load works on a cluster as on one Redis.
func TestClusterLoadStaged(t *testing.T) {
	t.Parallel()
	s, rdb := newClusterStore(t, testShards)
	const id, n = 45, 5_000
	ps, total := makePackets(1, n)
	loaded, err := s.LoadEnvelope(t.Context(), id, time.Now().Add(time.Hour), total, ps)
	if err != nil || !loaded {
		t.Fatalf("LoadEnvelope = %v, %v", loaded, err)
	}
	if got := rdb.LLen(t.Context(), s.Keys().Pool(id)).Val(); got != n {
		t.Errorf("pool holds %d packets, want %d", got, n)
	}
	if ttl := rdb.PTTL(t.Context(), s.Keys().Pool(id)).Val(); ttl != -1 {
		t.Errorf("pool expires in %v, want never", ttl)
	}
}

// An operator's reload in steps runs on a cluster: every step's keys are in
// the envelope's slot.
func TestClusterReloadInSteps(t *testing.T) {
	t.Parallel()
	s, rdb := newClusterStore(t, testShards)
	const id, n, claimed = 46, 5_000, 2_500
	c := suspendedWithClaims(t, s, id, n, claimed)
	if err := c.reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantReloaded(t, s, rdb, id, c.held, c.pool)
}
