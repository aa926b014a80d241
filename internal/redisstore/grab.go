package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	rs "redpacket/internal/redisscript"
)

// Claim is a user's packet of an envelope.
type Claim struct {
	PacketID    int64
	AmountCents int64
	GrabbedAt   time.Time
	OrderNo     string
	Repeat      bool // the user had grabbed before; this is that same packet
}

// Grab takes a packet of the envelope for the user at time now and gives it
// an order number, or returns the user's earlier claim (with its own order
// number) with Repeat set. A refusal takes no number. When the grab's shard
// has no number to give, the store's OrderNumbering supplies some and the
// grab is asked again; a width used up for the day is
// ErrOrderNumbersExhausted.
func (s *Store) Grab(ctx context.Context, envelopeID int64, userID string, now time.Time) (Claim, error) {
	return s.GrabWithPassword(ctx, envelopeID, userID, "", now)
}

// GrabWithPassword is Grab carrying the digest of the password the user
// gave (envelope.PasswordDigest; "" for none): an envelope with a password
// refuses any other with ErrWrongPassword, taking nothing.
func (s *Store) GrabWithPassword(ctx context.Context, envelopeID int64, userID, digest string, now time.Time) (Claim, error) {
	return s.grabWith(ctx, envelopeID, userID, digest, now, false)
}

// GrabUnreserved is GrabWithPassword for a grab that holds no reservation of
// the user's limits: it is answered as GrabWithPassword would answer it (a
// holder's repeat, or a refusal) except where it would take a packet; there
// it takes nothing and returns ErrUnreserved. So a limited grab of an
// envelope with nothing left to take need not reserve and give back.
func (s *Store) GrabUnreserved(ctx context.Context, envelopeID int64, userID, digest string, now time.Time) (Claim, error) {
	return s.grabWith(ctx, envelopeID, userID, digest, now, true)
}

func (s *Store) grabWith(ctx context.Context, envelopeID int64, userID, digest string, now time.Time, unreserved bool) (Claim, error) {
	if s.numbering == nil {
		return Claim{}, fmt.Errorf("grab envelope %d: the store numbers no orders (NumberOrders)", envelopeID)
	}
	if envelopeID < 1 || envelopeID > maxExact {
		// No envelope has such an id (ids are exact in Lua and JSON), and
		// the script would refuse its whole call over it: every grab
		// coalesced with this one would fail.
		return Claim{}, fmt.Errorf("grab envelope %d: %w", envelopeID, ErrNotLoaded)
	}
	for attempt := 1; ; attempt++ {
		buckets, err := s.buckets(ctx, envelopeID)
		if err != nil {
			return Claim{}, fmt.Errorf("grab envelope %d: %w: %w", envelopeID, errNotSent, err)
		}
		g := s.newGrab(envelopeID, userID, now, buckets)
		g.args[3] = digest
		if unreserved {
			g.args[5] = 1
		}
		r := s.grabOnce(ctx, g)
		var short *OrderShortage
		c, err := r.claim()
		switch {
		case errors.As(r.err, &short) && attempt < maxGrabAttempts:
			if err := s.numbering.Supply(ctx, short); err != nil {
				return Claim{}, fmt.Errorf("grab envelope %d: %w (after %w)", envelopeID, err, short)
			}
		case short != nil:
			return Claim{}, fmt.Errorf("grab envelope %d: still no order number after %d supplies: %w", envelopeID, attempt-1, short)
		case errors.Is(err, errStaleBuckets) && attempt < maxGrabAttempts:
			// Loaded or reloaded since its buckets were read.
			s.bucketCache.forget(envelopeID)
		case err != nil:
			return c, fmt.Errorf("grab envelope %d: %w", envelopeID, err)
		default:
			return c, nil
		}
	}
}

// errNotSent marks a grab that failed before its script was sent.
var errNotSent = errors.New("not sent")

// TookNothing reports an error of a grab that certainly took no packet: it
// was never sent, Redis refused it before running it, or the script answered
// a refusal (or asked for order numbers, or for its buckets to be read again)
// and took nothing. A call whose answer was lost, or that replicas did not
// confirm, may have taken one: false.
func TookNothing(err error) bool {
	var short *OrderShortage
	if errors.As(err, &short) || errors.Is(err, errNotSent) || errors.Is(err, errStaleBuckets) ||
		refusedUnrun(err) {
		return true
	}
	for _, o := range grabOutcomes {
		if o.Err != nil && errors.Is(err, o.Err) {
			return true
		}
	}
	return false
}

// refusedUnrun reports a Redis reply that refuses a script call before it
// runs: its shard's slot is elsewhere (MOVED, ASK: the cluster client follows
// these itself, but not a call sent to a master directly, as with
// WaitForReplicas) or moving (TRYAGAIN), the cluster or the master is down
// (CLUSTERDOWN, MASTERDOWN), the data is still loading (LOADING), or the
// node is a replica, where every write is refused, the first included
// (READONLY), or Redis is full (OOM: it refuses a script's first write that
// may grow memory, never one after another write, so a script refused so
// has written nothing). Calls are sent at most once, so go-redis hands
// these back.
func refusedUnrun(err error) bool {
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask || redis.IsTryAgainError(err) || redis.IsClusterDownError(err) ||
		redis.IsMasterDownError(err) || redis.IsLoadingError(err) || redis.IsReadOnlyError(err) ||
		redis.HasErrorPrefix(err, "OOM")
}

// maxGrabAttempts bounds how often a grab is asked again after its shard
// was supplied order numbers (others may take them first) or its envelope's
// claim buckets were read again.
const maxGrabAttempts = 5

func (s *Store) grabOnce(ctx context.Context, g grabCall) grabReply {
	if err := ctx.Err(); err != nil {
		// The caller has gone: a grab sent now would grant a packet no
		// one is told about.
		return grabReply{err: fmt.Errorf("%w: %w", errNotSent, err)}
	}
	if s.coalescer != nil {
		return s.coalescer.grab(ctx, g)
	}
	sc := &shardCall{grabs: []*pendingGrab{{call: g}}}
	keys, args := s.grabArgs(sc)
	sc.cmd = grabScript.RunCmd(ctx, s.rdb, keys, args...)
	return s.replies(sc)[0]
}

// grabCall is one grab's part of a grab script call.
type grabCall struct {
	shard int
	date  string    // the day of its order number
	keys  [4]string // meta, pool, the user's claims hash, recipients
	args  [6]any    // user, now, envelope, password digest, claim buckets, unreserved (0 or 1)
}

func (s *Store) newGrab(envelopeID int64, userID string, now time.Time, buckets int) grabCall {
	return grabCall{
		shard: s.keys.Shard(envelopeID),
		date:  s.numbering.Date(now),
		keys:  s.keys.GrabKeys(envelopeID, buckets, userID),
		args:  [6]any{userID, now.UnixMilli(), envelopeID, "", buckets, 0},
	}
}

// grabArgs are the KEYS and ARGV of one call of grab.lua for the grabs of sc
// (one shard, one day).
func (s *Store) grabArgs(sc *shardCall) ([]string, []any) {
	g0 := sc.grabs[0].call
	ks := make([]string, 2, 2+len(g0.keys)*len(sc.grabs))
	ks[0], ks[1] = s.keys.Consumed(g0.shard), s.keys.Orders(g0.shard, g0.date)
	args := make([]any, 5, 5+len(g0.args)*len(sc.grabs))
	args[0], args[1], args[2], args[3], args[4] = g0.date, s.orderWidth, s.keys.Shards(), g0.shard+1, s.maxCounter[g0.shard]
	for _, p := range sc.grabs {
		ks = append(ks, p.call.keys[:]...)
		args = append(args, p.call.args[:]...)
	}
	return ks, args
}

// replies reads one call's reply into each grab's: its outcome code and
// claim, or the error of the whole call, or, for a grab that found a packet
// but no number, what the call says about the order numbers. A call that
// granted packets tells the numbering how many numbers are left.
func (s *Store) replies(sc *shardCall) []grabReply {
	out := make([]grabReply, len(sc.grabs))
	g0 := sc.grabs[0].call
	code, info, pairs, err := parseGrabCall(sc.cmd, len(sc.grabs))
	if err == nil {
		err = sc.err
	}
	if err != nil {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	var short error
	switch code {
	case grabDone:
		if left, ok := info.(int64); ok && left >= 0 {
			s.numbering.Remaining(g0.shard, g0.date, left)
		}
	case grabFence:
		id, ok := info.(string)
		if !ok || id == "" {
			err := fmt.Errorf("grab: %w: fence without an identity: %#v", rs.ErrReply, info)
			for i := range out {
				out[i].err = err
			}
			return out
		}
		short = &OrderShortage{Shard: g0.shard, Date: g0.date, Identity: id}
	case grabCeiling:
		short = &OrderShortage{Shard: g0.shard, Date: g0.date}
	case grabExhausted:
		short = fmt.Errorf("shard %d on %s: %w", g0.shard, g0.date, ErrOrderNumbersExhausted)
	}
	for i := range out {
		out[i].code, out[i].raw = pairs[2*i], pairs[2*i+1]
		if out[i].code == int64(grabAwaiting) {
			if out[i].err = short; short == nil {
				out[i].err = fmt.Errorf("grab: %w: a grab awaits a number in a call that says %d", rs.ErrReply, code)
			}
		}
	}
	return out
}

// parseGrabCall reads {code, {info, code_1, claim_1, ...}} for n grabs.
func parseGrabCall(cmd *redis.Cmd, n int) (rs.Code, any, []any, error) {
	code, payload, err := grabScript.Parse(cmd.Result())
	if err != nil {
		return 0, nil, nil, err
	}
	l, err := rs.List(payload, 1+2*n)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("grab.lua: %w", err)
	}
	return code, l[0], l[1:], nil
}

// grabReply is one grab's outcome as the script answered it.
type grabReply struct {
	code any // the grab's code, an int64 when the reply is well formed
	raw  any // its claim, a string
	err  error
}

// claim turns the outcome into the grab's claim or error: the one place a
// grab's code becomes an error (grabOutcomes).
func (r grabReply) claim() (Claim, error) {
	if r.err != nil {
		return Claim{}, r.err
	}
	n, ok := r.code.(int64)
	raw, okRaw := r.raw.(string)
	if !ok || !okRaw {
		return Claim{}, fmt.Errorf("grab: %w: outcome %#v, %#v", rs.ErrReply, r.code, r.raw)
	}
	return parseOutcome(rs.Code(n), raw)
}

// parseOutcome reads one grab's code and claim.
func parseOutcome(code rs.Code, raw string) (Claim, error) {
	i := slices.IndexFunc(grabOutcomes, func(d rs.Reply) bool { return d.Code == code })
	switch {
	case i < 0 || code == grabAwaiting:
		return Claim{}, fmt.Errorf("grab: %w: outcome %d", rs.ErrReply, code)
	case grabOutcomes[i].Err != nil:
		return Claim{}, grabOutcomes[i].Err
	}
	c, err := parseClaim(raw)
	c.Repeat = code == grabRepeat
	return c, err
}

// ParseClaim reads a claim as a claims hash holds it (for the audit).
func ParseClaim(raw string) (Claim, error) { return parseClaim(raw) }

// parseClaim reads a claim (codec.go), compact or in the text of earlier
// versions, "<packet>:<amount>:<grabbed_ms>:<order_no>". The order number
// is empty only in a claim an operator's reload restored from a PostgreSQL
// row that has none.
func parseClaim(raw string) (Claim, error) {
	if isCompact(raw) {
		c, rest, err := decodeClaimBody(raw[1:])
		if err != nil || rest != "" {
			return Claim{}, fmt.Errorf("malformed claim %q", raw)
		}
		return c, nil
	}
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
