package envelope

import (
	"strconv"
	"time"
)

// Limits are the create limits. They are configurable by the operator; use
// DefaultLimits unless configured otherwise (a zero Limits rejects every
// request).
type Limits struct {
	MaxPackets     int   // largest allowed count
	MaxTotalCents  int64 // largest allowed total_cents
	MaxPacketCents int64 // largest packet of any split
}

// MaxCents bounds every amount of money the service stores or adds up
// (totals, packets, grabbed sums): 2^53 - 1, the largest integer every Lua
// number holds exactly. MAX_TOTAL_CENTS may not exceed it.
const MaxCents = 1<<53 - 1

// DefaultLimits returns the limits of the API contract: at most 100000
// packets and at most 100000000 cents (1,000,000.00) per envelope, and no
// packet above 20000 cents (200.00, the usual cap of a red packet).
func DefaultLimits() Limits {
	return Limits{MaxPackets: 100000, MaxTotalCents: 100000000, MaxPacketCents: 20000}
}

// DefaultExpiresIn is the lifetime of an envelope whose request gives no
// expires_in_seconds.
const DefaultExpiresIn = 86400 * time.Second

// MaxExpiresIn is the longest lifetime a sender may ask for (7 days).
const MaxExpiresIn = 604800 * time.Second

// maxIDLen is the longest allowed user or sender id, in bytes (ids are ASCII).
const maxIDLen = 64

// CreateRequest is what a sender asks for. ExpiresInSeconds nil means the
// default (86400); Kind "" means KindRandom; Recipients nil means anyone may
// grab; Password nil means no password; StartsAt "" means from creation.
type CreateRequest struct {
	SenderID         string
	TotalCents       int64
	Count            int64
	ExpiresInSeconds *int64
	Kind             Kind
	Recipients       []string
	Password         *string
	Greeting         string
	Metadata         map[string]string
	StartsAt         string // RFC 3339
}

// Checked is what a valid request comes to.
type Checked struct {
	Kind     Kind
	TTL      time.Duration // from StartsAt
	StartsAt time.Time     // zero: offered from creation
}

// Validate checks every rule as Check does at the present time and returns
// the effective expiry duration.
func (l Limits) Validate(r CreateRequest) (time.Duration, error) {
	c, err := l.Check(r, time.Now())
	return c.TTL, err
}

// Check checks every rule and returns the first violation as *FieldError.
//
// The rules are checked in this order: sender_id, kind, total_cents range,
// count range, total_cents >= count, the split's packets under
// MaxPacketCents, recipients, password, greeting, metadata,
// expires_in_seconds, starts_at. Each field's own range is checked before
// the cross-field rules so that, say, count 0 is reported as a bad count
// rather than as a total that is too small.
func (l Limits) Check(r CreateRequest, now time.Time) (Checked, error) {
	if err := ValidateUserID("sender_id", r.SenderID); err != nil {
		return Checked{}, err
	}
	kind, err := checkKind(r.Kind)
	if err != nil {
		return Checked{}, err
	}
	if maxTotal := min(l.MaxTotalCents, MaxCents); r.TotalCents < 1 || r.TotalCents > maxTotal {
		return Checked{}, rangeError("total_cents", 1, maxTotal)
	}
	if r.Count < 1 || r.Count > int64(l.MaxPackets) {
		return Checked{}, rangeError("count", 1, int64(l.MaxPackets))
	}
	if r.TotalCents < r.Count {
		return Checked{}, &FieldError{Field: "total_cents", Problem: "must be at least count (every packet is at least 1 cent)"}
	}
	if err := l.checkSplit(kind, r.TotalCents, r.Count); err != nil {
		return Checked{}, err
	}
	if err := checkExtras(r); err != nil {
		return Checked{}, err
	}
	ttl, err := expiry(r.ExpiresInSeconds)
	if err != nil {
		return Checked{}, err
	}
	start, err := startsAt(r.StartsAt, now)
	return Checked{Kind: kind, TTL: ttl, StartsAt: start}, err
}

// expiry turns the optional expires_in_seconds into a duration.
// ExpiresIn is the lifetime a request's expires_in_seconds asks for (nil:
// DefaultExpiresIn), from its start.
func ExpiresIn(seconds *int64) (time.Duration, error) { return expiry(seconds) }

func expiry(seconds *int64) (time.Duration, error) {
	if seconds == nil {
		return DefaultExpiresIn, nil
	}
	maxSeconds := int64(MaxExpiresIn / time.Second)
	if *seconds < 1 || *seconds > maxSeconds {
		return 0, rangeError("expires_in_seconds", 1, maxSeconds)
	}
	// Bounded above, so the multiplication cannot overflow.
	return time.Duration(*seconds) * time.Second, nil
}

func checkKind(k Kind) (Kind, error) {
	switch k {
	case "":
		return KindRandom, nil
	case KindRandom, KindFixed:
		return k, nil
	}
	return "", &FieldError{Field: "kind", Problem: "must be random or fixed"}
}

// checkSplit refuses an envelope whose packets cannot all stay within
// MaxPacketCents, and a fixed one whose total is not count equal packets.
// The average is compared rounded up, so count * MaxPacketCents is never
// formed (it can pass int64).
func (l Limits) checkSplit(kind Kind, total, count int64) error {
	if kind == KindFixed && total%count != 0 {
		return &FieldError{Field: "total_cents", Problem: "must be a multiple of count for a fixed envelope"}
	}
	if (total+count-1)/count > l.MaxPacketCents {
		return &FieldError{Field: "total_cents", Problem: "must be at most count × " +
			strconv.FormatInt(l.MaxPacketCents, 10) + " (no packet may exceed MAX_PACKET_CENTS)"}
	}
	return nil
}

func rangeError(field string, lo, hi int64) *FieldError {
	return &FieldError{
		Field:   field,
		Problem: "must be between " + strconv.FormatInt(lo, 10) + " and " + strconv.FormatInt(hi, 10),
	}
}

// idByte marks the bytes allowed in an id: [A-Za-z0-9_.:@-]. A lookup table
// rather than a regexp because ValidateUserID runs on every grab. It is the
// one definition of those characters: the HTTP layer's fast grab decoder asks
// IsIDByte too.
var idByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
		t[c+'a'-'A'] = true
	}
	for _, c := range "_.:@-" {
		t[c] = true
	}
	return t
}()

// IsIDByte reports whether c may appear in a user or sender id: one of
// [A-Za-z0-9_.:@-]. None of them needs escaping in JSON.
func IsIDByte(c byte) bool { return idByte[c] }

// ValidateUserID checks a user or sender id: 1 to 64 characters of
// [A-Za-z0-9_.:@-]. field is the JSON field name used in the error
// ("user_id" or "sender_id"). It does not allocate when the id is valid.
//
// Bytes are checked, not runes: every allowed character is ASCII, so any byte
// of a multi-byte UTF-8 sequence is rejected, and the length limit in bytes
// equals the limit in characters.
func ValidateUserID(field, id string) error {
	if len(id) < 1 || len(id) > maxIDLen {
		return idError(field)
	}
	for i := 0; i < len(id); i++ {
		if !idByte[id[i]] {
			return idError(field)
		}
	}
	return nil
}

func idError(field string) *FieldError {
	return &FieldError{Field: field, Problem: "must be 1 to 64 characters of [A-Za-z0-9_.:@-]"}
}
