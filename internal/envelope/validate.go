package envelope

import (
	"strconv"
	"time"
)

// Limits are the create limits. They are configurable by the operator; use
// DefaultLimits unless configured otherwise (a zero Limits rejects every
// request).
type Limits struct {
	MaxPackets    int   // largest allowed count
	MaxTotalCents int64 // largest allowed total_cents
}

// MaxCents bounds every amount of money the service stores or adds up
// (totals, packets, grabbed sums): 2^53 - 1, the largest integer every Lua
// number holds exactly. MAX_TOTAL_CENTS may not exceed it.
const MaxCents = 1<<53 - 1

// DefaultLimits returns the limits of the API contract: at most 100000
// packets and at most 100000000 cents (1,000,000.00) per envelope.
func DefaultLimits() Limits {
	return Limits{MaxPackets: 100000, MaxTotalCents: 100000000}
}

// DefaultExpiresIn is the lifetime of an envelope whose request gives no
// expires_in_seconds.
const DefaultExpiresIn = 86400 * time.Second

// MaxExpiresIn is the longest lifetime a sender may ask for (7 days).
const MaxExpiresIn = 604800 * time.Second

// maxIDLen is the longest allowed user or sender id, in bytes (ids are ASCII).
const maxIDLen = 64

// CreateRequest is what a sender asks for. ExpiresInSeconds nil means the
// default (86400).
type CreateRequest struct {
	SenderID         string
	TotalCents       int64
	Count            int64
	ExpiresInSeconds *int64
}

// Validate checks every rule and returns the first violation as *FieldError.
// It returns the effective expiry duration.
//
// The rules are checked in this order: sender_id, total_cents range, count
// range, total_cents >= count, expires_in_seconds. Each field's own range is
// checked before the cross-field rule so that, say, count 0 is reported as a
// bad count rather than as a total that is too small.
func (l Limits) Validate(r CreateRequest) (time.Duration, error) {
	if err := ValidateUserID("sender_id", r.SenderID); err != nil {
		return 0, err
	}
	if maxTotal := min(l.MaxTotalCents, MaxCents); r.TotalCents < 1 || r.TotalCents > maxTotal {
		return 0, rangeError("total_cents", 1, maxTotal)
	}
	if r.Count < 1 || r.Count > int64(l.MaxPackets) {
		return 0, rangeError("count", 1, int64(l.MaxPackets))
	}
	if r.TotalCents < r.Count {
		return 0, &FieldError{Field: "total_cents", Problem: "must be at least count (every packet is at least 1 cent)"}
	}
	return expiry(r.ExpiresInSeconds)
}

// expiry turns the optional expires_in_seconds into a duration.
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
