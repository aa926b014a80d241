// Package redisstore is the hot path: key names, the embedded Lua scripts and
// the calls that run them (load an envelope, grab a packet, hand claims to the
// flusher).
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
)

// Store runs the scripts against one Redis or a Redis Cluster.
type Store struct {
	rdb       redis.UniversalClient
	keys      Keys
	coalescer *coalescer // set by Coalesce

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
func (s *Store) LoadEnvelopeIn(ctx context.Context, epoch string, id int64, expiresAt time.Time, totalCents int64, packets []Packet) (loaded bool, err error) {
	args := make([]any, 0, 4+len(packets))
	args = append(args, expiresAt.UnixMilli(), len(packets), totalCents, epoch)
	buf := make([]byte, 0, 24)
	for _, p := range packets {
		buf = appendPacket(buf[:0], p)
		args = append(args, string(buf))
	}
	keys := []string{s.keys.Meta(id), s.keys.Pool(id), s.keys.Claims(id), s.keys.Epoch(s.keys.Shard(id))}
	code, err := loadScript.Run(ctx, s.rdb, keys, args...).Int()
	if err != nil {
		return false, fmt.Errorf("load envelope %d: %w", id, err)
	}
	switch code {
	case loadDone:
		return true, nil
	case loadAlready:
		return false, nil
	case loadInconsistent:
		return false, fmt.Errorf("load envelope %d: %w", id, ErrInconsistent)
	case loadEpochChanged:
		return false, fmt.Errorf("load envelope %d: %w", id, ErrEpochChanged)
	case loadGivenUp:
		return false, fmt.Errorf("load envelope %d: %w", id, ErrGivenUp)
	}
	return false, fmt.Errorf("load envelope %d: unexpected reply %d", id, code)
}

func appendPacket(b []byte, p Packet) []byte {
	b = strconv.AppendInt(b, p.ID, 10)
	b = append(b, ':')
	return strconv.AppendInt(b, p.AmountCents, 10)
}

// Claim is a user's packet of an envelope.
type Claim struct {
	PacketID    int64
	AmountCents int64
	GrabbedAt   time.Time
	OrderNo     string
	Repeat      bool // the user had grabbed before; this is that same packet
}

// Grab takes a packet of the envelope for the user at time now, recording
// orderNo with it, or returns the user's earlier claim (with its own order
// number) with Repeat set.
func (s *Store) Grab(ctx context.Context, envelopeID int64, userID string, now time.Time, orderNo string) (Claim, error) {
	g := s.newGrab(envelopeID, userID, now, orderNo)
	var reply []any
	var err error
	if s.coalescer != nil {
		reply, err = s.coalescer.grab(ctx, g)
	} else {
		keys := append([]string{s.keys.Consumed(g.shard)}, g.keys[:]...)
		reply, err = grabScript.Run(ctx, s.rdb, keys, g.args[:]...).Slice()
	}
	if err != nil {
		return Claim{}, fmt.Errorf("grab envelope %d: %w", envelopeID, err)
	}
	return parseGrabReply(reply)
}

// grabCall is one grab's part of a grab script call.
type grabCall struct {
	shard int
	keys  [3]string // meta, pool, claims
	args  [4]any    // user, now, envelope, order number
}

func (s *Store) newGrab(envelopeID int64, userID string, now time.Time, orderNo string) grabCall {
	return grabCall{
		shard: s.keys.Shard(envelopeID),
		keys:  [3]string{s.keys.Meta(envelopeID), s.keys.Pool(envelopeID), s.keys.Claims(envelopeID)},
		args:  [4]any{userID, now.UnixMilli(), envelopeID, orderNo},
	}
}

// parseGrabReply reads one grab's {code, claim}.
func parseGrabReply(reply []any) (Claim, error) {
	if len(reply) != 2 {
		return Claim{}, fmt.Errorf("grab: unexpected reply %v", reply)
	}
	code, _ := reply[0].(int64)
	switch code {
	case grabGranted, grabRepeat:
		raw, _ := reply[1].(string)
		c, err := parseClaim(raw)
		c.Repeat = code == grabRepeat
		return c, err
	case grabNotLoaded:
		return Claim{}, ErrNotLoaded
	case grabClosed:
		return Claim{}, ErrClosed
	case grabSoldOut:
		return Claim{}, ErrSoldOut
	case grabSuspended:
		return Claim{}, ErrSuspended
	}
	return Claim{}, fmt.Errorf("grab: unexpected reply %v", reply)
}

// parseClaim reads "<packet>:<amount>:<grabbed_ms>:<order_no>". The order
// number is empty only in a claim an operator's reload restored from a
// PostgreSQL row that has none.
func parseClaim(raw string) (Claim, error) {
	f, rest, err := splitInts(raw, 3)
	if err != nil || (rest != "" && !isDigits(rest)) {
		return Claim{}, fmt.Errorf("malformed claim %q", raw)
	}
	return Claim{PacketID: f[0], AmountCents: f[1], GrabbedAt: time.UnixMilli(f[2]).UTC(), OrderNo: rest}, nil
}

// splitInts reads n colon-terminated integers from the front of s and
// returns them with the rest of s.
func splitInts(s string, n int) ([]int64, string, error) {
	out := make([]int64, n)
	for i := range n {
		j := strings.IndexByte(s, ':')
		if j < 0 {
			return nil, "", errors.New("too few fields")
		}
		v, err := strconv.ParseInt(s[:j], 10, 64)
		if err != nil {
			return nil, "", err
		}
		out[i], s = v, s[j+1:]
	}
	return out, s, nil
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
