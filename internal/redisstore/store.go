// Package redisstore is the hot path: key names, the embedded Lua scripts and
// the calls that run them (load an envelope, grab and number a packet, hand
// claims to the flusher). Every script answers {code, payload} (package
// redisscript); scripts.go maps each code to what it means.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Errors a grab can end with; the caller maps them to API answers.
var (
	ErrNotLoaded     = errors.New("envelope not loaded in redis")
	ErrClosed        = errors.New("envelope closed or expired")
	ErrSoldOut       = errors.New("envelope sold out")
	ErrSuspended     = errors.New("envelope suspended: redis lost part of its state")
	ErrInconsistent  = errors.New("envelope state in redis is partial")
	ErrEpochChanged  = errors.New("redis shard lost its data since its epoch was checked")
	ErrNotReplicated = errors.New("grab not confirmed by enough redis replicas")
	ErrGivenUp       = errors.New("envelope was given up or suspended before it was loaded")
	// ErrUnstaged: the packets a loader staged for a large envelope (or the
	// claims an operator's reload wrote) were gone before they were loaded
	// (their list expired, or Redis lost them); nothing was loaded, and a
	// load may start again.
	ErrUnstaged = errors.New("packets staged for loading are gone; nothing was loaded")
	// ErrOtherEnvelope: Redis holds another envelope's state under the id
	// (ids handed out again, as after PostgreSQL was restored from a
	// backup): this envelope was never loaded there.
	ErrOtherEnvelope = errors.New("redis holds another envelope under this id (were ids handed out again?); nothing was loaded")
	ErrBadState      = errors.New("envelope state in redis fails a check (not numbers, or beyond exact integers); nothing was changed")
	ErrNotSuspended  = errors.New("redis does not show the envelope suspended; suspend it first")
	ErrNotStarted    = errors.New("envelope not started yet")
	ErrNotRecipient  = errors.New("user is not a recipient of the envelope")
	ErrWrongPassword = errors.New("wrong password for the envelope")
	// ErrCreateUnderWay and ErrCreateOtherBody: a create with the
	// Idempotency-Key is under way, of the same request or another body.
	ErrCreateUnderWay  = errors.New("a create with this idempotency key is under way")
	ErrCreateOtherBody = errors.New("a create with this idempotency key and another body is under way")
	// ErrCreateMarkGone: a create's mark expired or was replaced by another
	// create's (RenewCreateMark).
	ErrCreateMarkGone = errors.New("the create's mark of its idempotency key is gone")
	// ErrUnreserved: a grab sent without a reservation (GrabUnreserved)
	// would have taken a packet; it took nothing.
	ErrUnreserved = errors.New("grab would take a packet but holds no reservation of the user's limits")
)

// Store runs the scripts against one Redis or a Redis Cluster.
type Store struct {
	rdb       redis.UniversalClient
	keys      Keys
	coalescer *coalescer // set by Coalesce

	bucketCache bucketCache

	// Set by NumberOrders.
	numbering  OrderNumbering
	orderWidth string  // ARGV of grab.lua
	maxCounter []int64 // per shard

	// Set by WaitForReplicas before Coalesce.
	waitReplicas int
	waitTimeout  time.Duration
}

// WaitForReplicas makes coalesced grabs wait, before they are answered, until
// n replicas of their master hold them (Redis WAIT, up to timeout); a grab
// not confirmed in time fails with ErrNotReplicated. It is done but may be
// lost if the master fails now, so its user is told to try again: the retry
// answers the same packet if the grab survived, and grabs anew if not. Call
// it before Coalesce; 0 replicas turns it off.
func (s *Store) WaitForReplicas(n int, timeout time.Duration) {
	s.waitReplicas, s.waitTimeout = n, timeout
}

// New returns a Store; prefix goes inside every hash tag, shards is how many
// consumed queues envelopes are spread over.
func New(rdb redis.UniversalClient, prefix string, shards int) *Store {
	return &Store{rdb: rdb, keys: NewKeys(prefix, shards)}
}

// Keys returns the key builder.
func (s *Store) Keys() Keys { return s.keys }

// Packet is one packet as loaded into an envelope's pool.
type Packet struct {
	ID          int64
	AmountCents int64
}

// LoadEnvelope puts the packets into the pool and then the meta, atomically
// and once: loaded is false when the envelope was loaded before (nothing
// changed). It returns ErrInconsistent when part of the envelope's state
// exists without its meta.
func (s *Store) LoadEnvelope(ctx context.Context, id int64, expiresAt time.Time, totalCents int64, packets []Packet) (loaded bool, err error) {
	return s.LoadEnvelopeIn(ctx, "", id, expiresAt, totalCents, packets)
}

// LoadEnvelopeIn is LoadEnvelope for an envelope that may have been loaded
// before: it loads only while the shard still holds epoch, the token the
// caller checked against PostgreSQL, and returns ErrEpochChanged otherwise.
// The packets may add up to at most totalCents, itself at most 2^53 - 1,
// each worth at least a cent: checked here, before Redis is asked.
func (s *Store) LoadEnvelopeIn(ctx context.Context, epoch string, id int64, expiresAt time.Time, totalCents int64, packets []Packet) (loaded bool, err error) {
	return s.LoadGated(ctx, epoch, id, expiresAt, totalCents, packets, Gates{})
}

// Gates are an envelope's checks that take nothing, made by the grab script
// before a packet is taken.
type Gates struct {
	StartsAt       time.Time // grabs before it are refused; zero: none
	PasswordDigest string    // envelope.PasswordDigest of its password; "": none
	Recipients     []string  // the users who may grab; empty: anyone
}

// args are the gates as load.lua and reload.lua take them: starts,
// password digest, r, then the r recipients.
func (g Gates) args(args []any) []any {
	var starts int64
	if !g.StartsAt.IsZero() {
		starts = g.StartsAt.UnixMilli()
	}
	args = append(args, starts, g.PasswordDigest, len(g.Recipients))
	for _, u := range g.Recipients {
		args = append(args, u)
	}
	return args
}

// LoadGated is LoadEnvelopeIn for an envelope with gates.
func (s *Store) LoadGated(ctx context.Context, epoch string, id int64, expiresAt time.Time, totalCents int64, packets []Packet, g Gates) (loaded bool, err error) {
	if err := checkPackets(totalCents, packets); err != nil {
		return false, fmt.Errorf("load envelope %d: %w", id, err)
	}
	staging := s.keys.Staging(id, stagingToken())
	inline := packets
	if len(packets) > loadInline {
		inline = nil
		if err := s.stage(ctx, staging, packets); err != nil {
			s.dropStaged(ctx, staging)
			return false, fmt.Errorf("load envelope %d: stage its %d packets: %w", id, len(packets), err)
		}
	}
	args := make([]any, 0, 7+len(g.Recipients)+len(inline))
	args = append(args, expiresAt.UnixMilli(), len(packets), totalCents, epoch)
	args = g.args(args)
	args = appendPackets(args, inline)
	keys := []string{s.keys.Meta(id), s.keys.Pool(id), s.keys.Claims(id), s.keys.Epoch(s.keys.Shard(id)), s.keys.Recipients(id), staging}
	keys = append(keys, s.keys.ClaimBucketKeys(id, len(packets))...)
	code, _, err := loadScript.Run(ctx, s.rdb, keys, args...)
	if err != nil {
		// The script drops the list itself on every answer but a load;
		// after an error it may not have run, and the repair's next try
		// stages the envelope again. Once loaded, the list is gone.
		if inline == nil {
			s.dropStaged(ctx, staging)
		}
		return false, fmt.Errorf("load envelope %d: %w", id, err)
	}
	if code == loadLoaded {
		s.bucketCache.put(id, ClaimBuckets(len(packets)))
	}
	return code == loadLoaded, nil
}

// appendPackets appends each packet as the scripts take it.
func appendPackets(args []any, packets []Packet) []any {
	buf := make([]byte, 0, 24)
	for _, p := range packets {
		buf = appendPacket(buf[:0], p)
		args = append(args, string(buf))
	}
	return args
}

// checkPackets holds packets to what the scripts can add up exactly: a
// total of at most 2^53 - 1 cents, packets of at least a cent that add up to
// no more than it (so grabbed cents never pass the total).
func checkPackets(total int64, packets []Packet) error {
	if len(packets) == 0 || total < 1 || total > maxExact {
		return fmt.Errorf("%d packets, total %d cents: want at least one packet and 1..%d cents", len(packets), total, int64(maxExact))
	}
	left := total
	for _, p := range packets {
		if p.ID < 1 || p.AmountCents < 1 || p.AmountCents > left {
			return fmt.Errorf("packet %d of %d cents: ids and amounts must be positive and add up to at most the total %d", p.ID, p.AmountCents, total)
		}
		left -= p.AmountCents
	}
	return nil
}

func appendPacket(b []byte, p Packet) []byte {
	b = strconv.AppendInt(b, p.ID, 10)
	b = append(b, ':')
	return strconv.AppendInt(b, p.AmountCents, 10)
}
