package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	rs "redpacket/internal/redisscript"
)

// Closed is what Close and Suspend saw of an envelope before changing it.
type Closed struct {
	Found        bool       // the meta existed
	Before       MetaStatus // meta status before the call
	GrabbedCents int64      // cents granted in Redis, final once closed
	Claims       int64      // users holding a packet
	Pool         int64      // packets left in the pool before the call
}

// Close stops grants of an envelope of count packets for good, drops its
// pool and gives its meta and claims a lifetime of ttl, so repeat grabs are
// still answered for a while. A suspended or failed envelope is left
// unchanged.
func (s *Store) Close(ctx context.Context, id int64, count int, ttl time.Duration) (Closed, error) {
	return s.runClose(ctx, id, MetaClosed, ttl, s.keys.ClaimBucketKeys(id, count))
}

// Suspend stops grants of an envelope until an operator recovers it, and
// keeps its meta and claims until then: a closed envelope's had a lifetime,
// and its claims are what the operator decides from (who was told they got
// a packet).
func (s *Store) Suspend(ctx context.Context, id int64) (Closed, error) {
	// Read from the meta, not the cache: another process (an operator's
	// reload) may have rewritten the envelope with other buckets.
	n, err := s.rdb.HGet(ctx, s.keys.Meta(id), fieldBuckets).Int() // 0: no meta, or loaded before buckets
	switch {
	case err != nil && !errors.Is(err, redis.Nil):
		return Closed{}, fmt.Errorf("set envelope %d %s: claim buckets: %w", id, MetaSuspended, err)
	case n < 0 || n > ClaimBuckets(1_000_000): // MAX_PACKETS's largest
		// Not a count this service writes: suspended all the same, its
		// buckets left as they are.
		n = 0
	}
	buckets := make([]string, n)
	for b := range buckets {
		buckets[b] = s.keys.ClaimsBucket(id, n, b)
	}
	return s.runClose(ctx, id, MetaSuspended, 0, buckets)
}

func (s *Store) runClose(ctx context.Context, id int64, status MetaStatus, ttl time.Duration, buckets []string) (Closed, error) {
	keys := append([]string{s.keys.Meta(id), s.keys.Pool(id), s.keys.Claims(id), s.keys.Recipients(id)}, buckets...)
	code, payload, err := closeScript.Run(ctx, s.rdb, keys, string(status), max(ttl.Milliseconds(), 1))
	if err == nil && code == closeNoMeta {
		return Closed{}, nil
	}
	var c Closed
	if err == nil {
		c, err = parseClosed(payload)
	}
	if err != nil {
		return Closed{}, fmt.Errorf("set envelope %d %s: %w", id, status, err)
	}
	return c, nil
}

// parseClosed reads close.lua's {status before, grabbed_cents, claims, pool}.
func parseClosed(payload any) (Closed, error) {
	l, err := rs.List(payload, 4)
	if err != nil {
		return Closed{}, err
	}
	before, err := rs.String(l[0])
	c := Closed{Found: true, Before: MetaStatus(before)}
	for i, dst := range []*int64{&c.GrabbedCents, &c.Claims, &c.Pool} {
		if err == nil {
			*dst, err = rs.Int(l[i+1])
		}
	}
	return c, err
}

// Fail marks an envelope of count packets that never finished loading as
// failed in Redis, unless it was loaded after all (wasLoaded: it may have
// been offered, and nothing changed). A late load of a failed envelope
// changes nothing. Like LoadEnvelopeIn it acts only while the shard still
// holds epoch. Another envelope's meta under the id (its expiry or total
// not these) is ErrOtherEnvelope: this one was never loaded there.
func (s *Store) Fail(ctx context.Context, epoch string, id int64, count int, expiresAt time.Time, totalCents int64,
	ttl time.Duration) (wasLoaded bool, err error) {
	keys := []string{s.keys.Meta(id), s.keys.Pool(id), s.keys.Claims(id), s.keys.Epoch(s.keys.Shard(id))}
	keys = append(keys, s.keys.ClaimBucketKeys(id, count)...)
	code, _, err := failScript.Run(ctx, s.rdb, keys, max(ttl.Milliseconds(), 1), epoch, expiresAt.UnixMilli(), totalCents)
	if err != nil {
		return false, fmt.Errorf("fail envelope %d: %w", id, err)
	}
	return code == failWasLoaded, nil
}

// MetaState is what an envelope's meta says: its status and the cents
// granted so far.
type MetaState struct {
	Status       MetaStatus
	GrabbedCents int64
}

// Metas reads the meta of each envelope in one round trip; an envelope
// without meta (or with only a forgotten one) is absent from the map.
func (s *Store) Metas(ctx context.Context, ids []int64) (map[int64]MetaState, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, s.keys.Meta(id), fieldStatus, fieldGrabbedCents)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("read metas: %w", err)
	}
	out := make(map[int64]MetaState, len(ids))
	for i, c := range cmds {
		v := c.Val()
		status, _ := v[0].(string)
		cents, _ := v[1].(string)
		if v[1] == nil {
			continue // no meta, or a forgotten one: nothing granted to compare
		}
		n, err := strconv.ParseInt(cents, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("meta of envelope %d: grabbed cents %q: %w", ids[i], cents, err)
		}
		out[ids[i]] = MetaState{Status: MetaStatus(status), GrabbedCents: n}
	}
	return out, nil
}

// Queued counts an envelope's claims still waiting in its shard's queue or
// in flight. It reads the whole queue, a page at a time: an operator's tool,
// not for the hot path.
func (s *Store) Queued(ctx context.Context, id int64) (int, error) {
	shard := s.keys.Shard(id)
	n := 0
	// The queue before the in-flight list: a flusher's take moves claims
	// from the one to the other while the pages are read, and in this order
	// a moved claim is counted (perhaps twice), never missed.
	for _, key := range []string{s.keys.Consumed(shard), s.keys.Inflight(shard)} {
		for start := int64(0); ; start += queuedPage {
			page, err := s.rdb.LRange(ctx, key, start, start+queuedPage-1).Result()
			if err != nil {
				return 0, fmt.Errorf("queued claims of envelope %d: %w", id, err)
			}
			for _, raw := range page {
				if queuedEnvelope(raw) == id {
					n++
				}
			}
			if len(page) < queuedPage {
				break
			}
		}
	}
	return n, nil
}

const queuedPage = 1000

// Epochs returns the token each shard holds ("" where it has none). A shard
// whose token cannot be read (its Cluster master unreachable) is named in
// an *EpochsUnread error, with "" for its token and the others' read.
func (s *Store) Epochs(ctx context.Context) ([]string, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, s.keys.Shards())
	for shard := range cmds {
		cmds[shard] = pipe.Get(ctx, s.keys.Epoch(shard))
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	out := make([]string, len(cmds))
	unread := map[int]error{}
	for shard, c := range cmds {
		switch err := c.Err(); {
		case err == nil:
			out[shard] = c.Val()
		case !errors.Is(err, redis.Nil): // redis.Nil: no token yet
			unread[shard] = err
		}
	}
	if len(unread) > 0 {
		return out, &EpochsUnread{Shards: unread}
	}
	return out, nil
}

// Identities is, per shard, which Redis data the shard lives in now: the
// master_replid of the Redis (of a cluster, of the master holding the
// shard). It changes whenever that Redis restarts (from an AOF, a snapshot
// or empty) or a replica is promoted: then the data may be older than what
// was answered before, though the shard's epoch token survived (it is in
// that older copy). A shard whose master could not be read has "", and the
// error says why; the others are read all the same.
func (s *Store) Identities(ctx context.Context) ([]string, error) {
	out := make([]string, s.keys.Shards())
	cluster, ok := s.rdb.(*redis.ClusterClient)
	if !ok {
		id, err := identity(ctx, s.rdb)
		for shard := range out {
			out[shard] = id
		}
		return out, err
	}
	byMaster := map[string]string{}
	var errs []error
	for shard := range out {
		m, err := cluster.MasterForKey(ctx, s.keys.Consumed(shard))
		if err != nil {
			errs = append(errs, fmt.Errorf("master of shard %d: %w", shard, err))
			continue
		}
		id, read := byMaster[m.Options().Addr]
		if !read {
			if id, err = identity(ctx, m); err != nil {
				errs = append(errs, err)
			}
			byMaster[m.Options().Addr] = id
		}
		out[shard] = id
	}
	return out, errors.Join(errs...)
}

// identity is one Redis's master_replid.
func identity(ctx context.Context, c redis.Cmdable) (string, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return "", fmt.Errorf("read the redis identity: %w", err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_replid:"); ok {
			return v, nil
		}
	}
	return "", errors.New("read the redis identity: no master_replid in INFO replication")
}

// EpochsUnread names the shards whose tokens Epochs could not read, and why.
type EpochsUnread struct{ Shards map[int]error }

func (e *EpochsUnread) Error() string {
	shards := slices.Sorted(maps.Keys(e.Shards))
	return fmt.Sprintf("read the epochs of shards %v: %v", shards, e.Shards[shards[0]])
}

// Unread reports whether the shard's token could not be read.
func (e *EpochsUnread) Unread(shard int) bool { return e != nil && e.Shards[shard] != nil }

// SetEpoch stores a shard's token.
func (s *Store) SetEpoch(ctx context.Context, shard int, token string) error {
	if err := s.rdb.Set(ctx, s.keys.Epoch(shard), token, 0).Err(); err != nil {
		return fmt.Errorf("set epoch of shard %d: %w", shard, err)
	}
	return nil
}

// Forget deletes the keys of an envelope of count packets but for a meta of
// status forgotten, kept for ttl. Grabs of it are then answered from
// PostgreSQL, so it is only for envelopes PostgreSQL is finishing (an
// operator's refund); the meta left makes a creator's late load load
// nothing: deleted whole, a load still on its way would open the envelope
// again, its packets refunded.
func (s *Store) Forget(ctx context.Context, id int64, count int, ttl time.Duration) error {
	keys := append([]string{s.keys.Meta(id), s.keys.Pool(id), s.keys.Claims(id), s.keys.Recipients(id)},
		s.keys.ClaimBucketKeys(id, count)...)
	// One transaction of one slot: the keys share the envelope's shard tag.
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, keys...)
		p.HSet(ctx, s.keys.Meta(id), fieldStatus, string(MetaForgotten))
		p.PExpire(ctx, s.keys.Meta(id), ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget envelope %d: %w", id, err)
	}
	return nil
}

// MarkCreate marks a keyed create under way for ttl (Keys.CreateUnderWay,
// create_mark.lua) and returns the mark to end it with, or
// ErrCreateUnderWay (a create of the same request, by fingerprint, is under
// way) or ErrCreateOtherBody (one of another body is). On any other error
// the mark is returned too: the script may have run with its answer lost,
// and the caller ends it (UnmarkCreate), or a retry would wait it out.
func (s *Store) MarkCreate(ctx context.Context, client, idemKey string, fingerprint []byte, ttl time.Duration) (string, error) {
	token := make([]byte, 8)
	_, _ = rand.Read(token) // never fails (crypto/rand)
	mark := hex.EncodeToString(fingerprint) + ":" + hex.EncodeToString(token)
	_, _, err := createMarkScript.Run(ctx, s.rdb, []string{s.keys.CreateUnderWay(client, idemKey)}, mark,
		max(ttl.Milliseconds(), 1))
	if err != nil {
		return mark, fmt.Errorf("mark the create of an idempotency key: %w", err)
	}
	return mark, nil
}

// UnmarkCreate ends MarkCreate's mark, if it is still this create's.
func (s *Store) UnmarkCreate(ctx context.Context, client, idemKey, mark string) error {
	if _, _, err := createUnmarkScript.Run(ctx, s.rdb, []string{s.keys.CreateUnderWay(client, idemKey)}, mark, 0); err != nil {
		return fmt.Errorf("unmark the create of an idempotency key: %w", err)
	}
	return nil
}

// RenewCreateMark makes MarkCreate's mark last ttl from now, while the
// create goes on; ErrCreateMarkGone if it is no longer this create's.
func (s *Store) RenewCreateMark(ctx context.Context, client, idemKey, mark string, ttl time.Duration) error {
	code, _, err := createUnmarkScript.Run(ctx, s.rdb, []string{s.keys.CreateUnderWay(client, idemKey)}, mark,
		max(ttl.Milliseconds(), 1))
	switch {
	case err != nil:
		return fmt.Errorf("renew the create mark of an idempotency key: %w", err)
	case code == createNotOurs:
		return ErrCreateMarkGone
	}
	return nil
}
