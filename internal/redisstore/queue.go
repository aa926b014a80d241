package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	rs "redpacket/internal/redisscript"
)

// QueuedClaim is a granted grab waiting in a shard's queue for the flusher.
type QueuedClaim struct {
	EnvelopeID  int64
	PacketID    int64
	AmountCents int64
	UserID      string
	GrabbedAt   time.Time
	OrderNo     string
}

// ParseQueued reads a queue entry (codec.go), compact or in the text of
// earlier versions, "<envelope>:<packet>:<amount>:<grabbed_ms>:<order_no>:<user>";
// the user id comes last because it may itself contain colons.
func ParseQueued(raw string) (QueuedClaim, error) {
	if isCompact(raw) {
		return parseCompactQueued(raw)
	}
	f, rest, err := splitInts(raw, 4)
	orderNo, user, ok := strings.Cut(rest, ":")
	if err != nil || !ok || !isDigits(orderNo) || user == "" {
		return QueuedClaim{}, fmt.Errorf("malformed queued claim %q", raw)
	}
	return QueuedClaim{
		EnvelopeID: f[0], PacketID: f[1], AmountCents: f[2],
		GrabbedAt: time.UnixMilli(f[3]).UTC(), OrderNo: orderNo, UserID: user,
	}, nil
}

func parseCompactQueued(raw string) (QueuedClaim, error) {
	env, n := compactEnvelope(raw)
	if n == 0 {
		return QueuedClaim{}, fmt.Errorf("malformed queued claim %q", raw)
	}
	c, user, err := decodeClaimBody(raw[n:])
	if err != nil || c.OrderNo == "" || user == "" {
		return QueuedClaim{}, fmt.Errorf("malformed queued claim %q", raw)
	}
	return QueuedClaim{EnvelopeID: env, PacketID: c.PacketID, AmountCents: c.AmountCents,
		GrabbedAt: c.GrabbedAt, OrderNo: c.OrderNo, UserID: user}, nil
}

// Take returns the shard's in-flight batch: the one an earlier flusher left
// unacknowledged if any, else up to max of the oldest queued claims, moved
// atomically into the in-flight list. The batch stays there until Ack, so a
// flusher that dies before acknowledging loses nothing.
//
// With WaitForReplicas, the batch is returned only once the shard's replicas
// hold it (and so every grab before it), else ErrNotReplicated: a claim is
// never made durable in PostgreSQL while a failover could still take it back
// out of Redis and grant its packet again.
func (s *Store) Take(ctx context.Context, shard, max int) ([]string, error) {
	keys := []string{s.keys.Consumed(shard), s.keys.Inflight(shard)}
	if s.waitReplicas > 0 {
		return s.takeReplicated(ctx, shard, keys, max)
	}
	raw, err := parseTaken(takeScript.Run(ctx, s.rdb, keys, max))
	if err != nil {
		return nil, fmt.Errorf("take claims of shard %d: %w", shard, err)
	}
	return raw, nil
}

// parseTaken reads take.lua's list of claims.
func parseTaken(_ rs.Code, payload any, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	l, err := rs.List(payload, -1)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(l))
	for i, v := range l {
		if out[i], err = rs.String(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// takeReplicated runs the take, one write of its own (the take writes
// nothing when it hands back a batch already in flight) and WAIT on one
// connection to the shard's master: WAIT counts the replicas holding this
// connection's last write, and the replication stream is in order.
func (s *Store) takeReplicated(ctx context.Context, shard int, keys []string, size int) ([]string, error) {
	node, err := s.master(ctx, shard)
	if err != nil {
		return nil, err
	}
	pipe := node.Pipeline()
	take := takeScript.Eval(ctx, pipe, keys, size)
	pipe.Set(ctx, s.keys.Taken(shard), time.Now().UnixMilli(), 0)
	wait := pipe.Do(ctx, "WAIT", s.waitReplicas, max(s.waitTimeout.Milliseconds(), 1))
	_, _ = pipe.Exec(ctx) // each command carries its own error
	raw, err := parseTaken(takeScript.Parse(take.Result()))
	if err != nil {
		return nil, fmt.Errorf("take claims of shard %d: %w", shard, err)
	}
	if n, err := wait.Int(); err != nil || n < s.waitReplicas {
		return nil, fmt.Errorf("take claims of shard %d: %w: %d of %d replicas (%v)",
			shard, ErrNotReplicated, n, s.waitReplicas, err)
	}
	return raw, nil
}

// master is the client of the master holding a shard's keys.
func (s *Store) master(ctx context.Context, shard int) (redis.Cmdable, error) {
	cluster, ok := s.rdb.(*redis.ClusterClient)
	if !ok {
		return s.rdb, nil
	}
	node, err := cluster.MasterForKey(ctx, s.keys.Consumed(shard))
	if err != nil {
		return nil, fmt.Errorf("master of shard %d: %w", shard, err)
	}
	return node, nil
}

// Ack drops the shard's in-flight batch once it is durable in PostgreSQL,
// if the in-flight list still holds exactly batch (as Take returned it).
// acked is false when it holds something else: another flusher took the
// shard over, wrote this batch again and moved on. The entries of rejected
// go to the shard's rejected list in the same step, and only if acked.
func (s *Store) Ack(ctx context.Context, shard int, batch, rejected []string) (acked bool, err error) {
	if len(batch) == 0 {
		return true, nil
	}
	args := make([]any, 0, 3+len(rejected))
	args = append(args, len(batch), batch[0], batch[len(batch)-1])
	for _, r := range rejected {
		args = append(args, r)
	}
	code, _, err := ackScript.Run(ctx, s.rdb, []string{s.keys.Inflight(shard), s.keys.Rejected(shard)}, args...)
	if err != nil {
		return false, fmt.Errorf("ack shard %d: %w", shard, err)
	}
	return code == ackDropped, nil
}

// Pending returns how many claims wait in each shard's queue and in flight.
func (s *Store) Pending(ctx context.Context) ([]int64, error) {
	n := s.keys.Shards()
	pipe := s.rdb.Pipeline()
	lens := make([]*redis.IntCmd, 0, 2*n)
	for shard := range n {
		lens = append(lens, pipe.LLen(ctx, s.keys.Consumed(shard)), pipe.LLen(ctx, s.keys.Inflight(shard)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("pending claims: %w", err)
	}
	out := make([]int64, n)
	for shard := range out {
		out[shard] = lens[2*shard].Val() + lens[2*shard+1].Val()
	}
	return out, nil
}

// Live is an envelope's state as Redis sees it now.
type Live struct {
	Loaded       bool       // meta present
	Status       MetaStatus // meta status (open, or closed once settling)
	Remaining    int64      // packets left in the pool
	Claims       int64      // users holding a packet
	GrabbedCents int64
	// Reloading: an operator's reload began and has not opened the
	// envelope (it is under way, or stopped half-way); ReloadedClaims it
	// has written. Claims and GrabbedCents are then the meta's of before
	// it (0 for a meta a refund left), Remaining 0: the reload dropped the
	// pool first.
	Reloading      bool
	ReloadedClaims int64
}

// Live reads an envelope's live counts in one round trip.
func (s *Store) Live(ctx context.Context, envelopeID int64) (Live, error) {
	pipe := s.rdb.Pipeline()
	meta := pipe.HMGet(ctx, s.keys.Meta(envelopeID), fieldStatus, fieldGrabbedCents, fieldClaimed, fieldReloading, fieldReloaded)
	pool := pipe.LLen(ctx, s.keys.Pool(envelopeID))
	legacy := pipe.HLen(ctx, s.keys.Claims(envelopeID))
	if _, err := pipe.Exec(ctx); err != nil {
		return Live{}, fmt.Errorf("live state of envelope %d: %w", envelopeID, err)
	}
	vals := meta.Val()
	status, ok := vals[0].(string)
	if !ok || MetaStatus(status) == MetaForgotten { // what grabs see: nothing
		return Live{}, nil
	}
	cents, _ := vals[1].(string)
	grabbed, err := strconv.ParseInt(cents, 10, 64)
	if err != nil {
		return Live{}, fmt.Errorf("live state of envelope %d: grabbed_cents %q", envelopeID, cents)
	}
	// The buckets' claims are counted in the meta; an envelope loaded before
	// buckets has no count and its one hash is counted instead.
	claims := legacy.Val()
	if c, ok := vals[2].(string); ok {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			return Live{}, fmt.Errorf("live state of envelope %d: claimed %q", envelopeID, c)
		}
		claims += n
	}
	l := Live{Loaded: true, Status: MetaStatus(status), Remaining: pool.Val(), Claims: claims, GrabbedCents: grabbed}
	if _, ok := vals[3].(string); ok {
		l.Reloading = true
		n, _ := vals[4].(string)
		if l.ReloadedClaims, err = strconv.ParseInt(n, 10, 64); err != nil {
			return Live{}, fmt.Errorf("live state of envelope %d: reloaded_claims %q", envelopeID, n)
		}
	}
	return l, nil
}

// ShardPending returns how many claims wait in one shard's queue and in
// flight.
func (s *Store) ShardPending(ctx context.Context, shard int) (int64, error) {
	pipe := s.rdb.Pipeline()
	consumed := pipe.LLen(ctx, s.keys.Consumed(shard))
	inflight := pipe.LLen(ctx, s.keys.Inflight(shard))
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("pending claims of shard %d: %w", shard, err)
	}
	return consumed.Val() + inflight.Val(), nil
}
