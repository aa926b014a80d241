package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"redpacket/internal/redisstore"
)

// TestClaimBucketsStayListpacks: every claim of a big envelope, granted
// once each, lands in the user's bucket, and no bucket grows past what
// Redis keeps as a listpack by default (128 entries), so a claim costs a
// listpack entry rather than a hash table's.
func TestClaimBucketsStayListpacks(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	const id, n = 9, 20_000
	now := time.Now()
	load(t, s, id, n, now)
	stop := s.Coalesce(2, 64)
	defer stop()
	for u := range n {
		if _, err := s.Grab(ctx, id, fmt.Sprintf("user-%d", u), now); err != nil {
			t.Fatal(err)
		}
	}
	buckets := redisstore.ClaimBuckets(n)
	var sum int64
	for b, key := range k.ClaimBucketKeys(id, n) {
		l := rdb.HLen(ctx, key).Val()
		sum += l
		if enc := rdb.ObjectEncoding(ctx, key).Val(); l > 128 || enc != "listpack" {
			t.Errorf("bucket %d of %d holds %d claims as %s", b, buckets, l, enc)
		}
	}
	if live, err := s.Live(ctx, id); sum != n || err != nil || live.Claims != n {
		t.Errorf("buckets hold %d claims, Live counts %+v (%v); want %d", sum, live, err, n)
	}
	for _, u := range []string{"user-0", "user-19999"} {
		key := k.UserClaims(id, buckets, u)
		if !rdb.HExists(ctx, key, u).Val() {
			t.Errorf("%s's claim is not in its bucket %s", u, key)
		}
	}
}

// TestEnvelopeLoadedBeforeBuckets: an envelope whose meta has no buckets
// (loaded by an earlier version) keeps answering from its one claims hash:
// a holder's repeat in the old text, new grants beside it, the count, and a
// queue holding entries of both forms.
func TestEnvelopeLoadedBeforeBuckets(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	const id = 13
	now := ms(time.Now())
	load(t, s, id, 5, now)
	oldClaim := "99:7:1700000000000:202311140000000005"
	oldEntry := fmt.Sprintf("%d:%s:old", id, oldClaim)
	legacy(t, rdb, k, id, map[string]string{"old": oldClaim}, oldEntry)

	c, err := s.Grab(ctx, id, "old", now)
	if err != nil || !c.Repeat || c.PacketID != 99 || c.AmountCents != 7 || c.OrderNo != "202311140000000005" {
		t.Errorf("holder's grab = %+v, %v; want the repeat of %s", c, err, oldClaim)
	}
	fresh, err := s.Grab(ctx, id, "new", now)
	if err != nil || fresh.Repeat {
		t.Fatalf("new user's grab = %+v, %v", fresh, err)
	}
	if !rdb.HExists(ctx, k.Claims(id), "new").Val() {
		t.Errorf("the new claim is not in the envelope's one hash")
	}
	if live, err := s.Live(ctx, id); err != nil || live.Claims != 2 {
		t.Errorf("Live = %+v, %v; want 2 claims", live, err)
	}
	b, err := s.TakeBatch(ctx, k.Shard(id), 10)
	if err != nil || b.Malformed() != 0 || len(b.Claims) != 2 {
		t.Fatalf("batch = %+v, %v; want both entries read", b, err)
	}
	got := map[string]redisstore.QueuedClaim{}
	for _, q := range b.Claims {
		got[q.UserID] = q
	}
	if q := got["old"]; q.PacketID != 99 || q.OrderNo != "202311140000000005" || q.EnvelopeID != id {
		t.Errorf("old entry read as %+v", q)
	}
	if q := got["new"]; q.PacketID != fresh.PacketID || q.OrderNo != fresh.OrderNo || !q.GrabbedAt.Equal(now) {
		t.Errorf("new entry read as %+v, want %+v", q, fresh)
	}
}

// legacy turns a loaded envelope into one an earlier version loaded: no
// buckets in its meta, claims in its one hash, and an entry in the text
// of that version queued.
func legacy(t *testing.T, rdb redis.UniversalClient, k redisstore.Keys, id int64, claims map[string]string, entry string) {
	t.Helper()
	ctx := context.Background()
	for u, c := range claims {
		if err := rdb.HSet(ctx, k.Claims(id), u, c).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.HDel(ctx, k.Meta(id), "buckets", "claimed").Err(); err != nil {
		t.Fatal(err)
	}
	if entry == "" {
		return
	}
	if err := rdb.LPush(ctx, k.Consumed(k.Shard(id)), entry).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestGrabAfterReloadIntoBuckets: a grabber that knew an envelope by its one
// claims hash (loaded before buckets) keeps answering correctly after an
// operator's reload moved its claims into buckets: the script tells it its
// number is stale and it asks again with the meta's.
func TestGrabAfterReloadIntoBuckets(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	const id = 17
	now := ms(time.Now())
	load(t, s, id, 6, now)
	legacy(t, rdb, k, id, nil, "")
	rdb.Del(ctx, k.Consumed(k.Shard(id)))
	held, err := s.Grab(ctx, id, "holder", now) // into the one hash; 0 buckets remembered
	if err != nil {
		t.Fatal(err)
	}
	other := numbered(redisstore.Twin(s))
	if _, err := other.Suspend(ctx, id); err != nil {
		t.Fatal(err)
	}
	pool := poolPackets(t, rdb, k.Pool(id))
	err = other.Reload(ctx, id, now.Add(time.Hour), 21, 6,
		[]redisstore.HeldClaim{{UserID: "holder", Claim: held}}, pool, redisstore.Gates{})
	if err != nil {
		t.Fatal(err)
	}
	if rdb.Exists(ctx, k.Claims(id)).Val() != 0 {
		t.Errorf("the one hash survived the reload")
	}
	again, err := s.Grab(ctx, id, "holder", now)
	if err != nil || !again.Repeat || again.PacketID != held.PacketID || again.OrderNo != held.OrderNo {
		t.Errorf("holder after the reload = %+v, %v; want the repeat of %+v", again, err, held)
	}
	fresh, err := s.Grab(ctx, id, "fresh", now)
	if err != nil || fresh.Repeat || !rdb.HExists(ctx, k.UserClaims(id, 1, "fresh"), "fresh").Val() {
		t.Errorf("new user after the reload = %+v, %v; want a grant in the bucket", fresh, err)
	}
}

// poolPackets reads a pool of "<packet>:<amount>" entries.
func poolPackets(t *testing.T, rdb redis.UniversalClient, key string) []redisstore.Packet {
	t.Helper()
	var out []redisstore.Packet
	for _, e := range lrange(t, rdb, key) {
		var p redisstore.Packet
		if _, err := fmt.Sscanf(e, "%d:%d", &p.ID, &p.AmountCents); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// TestMetaWithBadBucketsIsRefused: a meta whose bucket count is not a
// positive number is bad state: the grab is refused, nothing taken.
func TestMetaWithBadBucketsIsRefused(t *testing.T) {
	t.Parallel()
	s, rdb := newStore(t)
	ctx := t.Context()
	k := s.Keys()
	for id, v := range map[int64]string{21: "12abc", 22: "0", 23: "-3"} {
		load(t, redisstore.Twin(s), id, 4, time.Now()) // loaded by another process: not remembered here
		if err := rdb.HSet(ctx, k.Meta(id), "buckets", v).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Grab(ctx, id, "alice", time.Now()); !errors.Is(err, redisstore.ErrBadState) {
			t.Errorf("grab with buckets %q = %v, want ErrBadState", v, err)
		}
		if n := llen(t, rdb, k.Pool(id)); n != 4 {
			t.Errorf("buckets %q: pool holds %d, want 4", v, n)
		}
	}
}
