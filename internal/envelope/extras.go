package envelope

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The limits of a create request's optional fields (the API document).
const (
	MaxRecipients     = 1000
	MaxPasswordLen    = 32 // characters
	MaxGreetingLen    = 64 // characters
	MaxMetadataKeys   = 20
	MaxMetadataKeyLen = 40  // bytes, all ASCII
	MaxMetadataValLen = 500 // characters
	// MaxStartsAhead is how far ahead an envelope may start.
	MaxStartsAhead = 7 * 24 * time.Hour
)

// checkExtras checks recipients, password, greeting and metadata, in that
// order.
func checkExtras(r CreateRequest) error {
	if err := checkRecipients(r.Recipients, r.Count); err != nil {
		return err
	}
	if r.Password != nil {
		if n := utf8.RuneCountInString(*r.Password); n < 1 || n > MaxPasswordLen || hasControl(*r.Password) {
			return &FieldError{Field: "password", Problem: "must be 1 to 32 characters, none a control character"}
		}
	}
	if utf8.RuneCountInString(r.Greeting) > MaxGreetingLen || hasControl(r.Greeting) {
		return &FieldError{Field: "greeting", Problem: "must be at most 64 characters, none a control character"}
	}
	return checkMetadata(r.Metadata)
}

// checkRecipients: nil is anyone; otherwise 1 to 1000 distinct user ids, at
// least as many as packets.
func checkRecipients(ids []string, count int64) error {
	if ids == nil {
		return nil
	}
	if len(ids) < 1 || len(ids) > MaxRecipients {
		return &FieldError{Field: "recipients", Problem: "must hold 1 to 1000 user ids"}
	}
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if err := ValidateUserID("recipients", id); err != nil {
			return &FieldError{Field: "recipients", Problem: "each must be 1 to 64 characters of [A-Za-z0-9_.:@-]"}
		}
		if _, dup := seen[id]; dup {
			return &FieldError{Field: "recipients", Problem: "must be distinct: " + strconv.Quote(id) + " is given twice"}
		}
		seen[id] = struct{}{}
	}
	if count > int64(len(ids)) {
		return &FieldError{Field: "count", Problem: "must be at most the number of recipients"}
	}
	return nil
}

func checkMetadata(m map[string]string) error {
	if len(m) > MaxMetadataKeys {
		return &FieldError{Field: "metadata", Problem: "must have at most 20 keys"}
	}
	for k, v := range m {
		if !metadataKey(k) {
			return &FieldError{Field: "metadata", Problem: "keys must be 1 to 40 characters of [A-Za-z0-9_.-]"}
		}
		if utf8.RuneCountInString(v) > MaxMetadataValLen {
			return &FieldError{Field: "metadata", Problem: "value of " + strconv.Quote(k) + " must be at most 500 characters"}
		}
		if strings.IndexByte(v, 0) >= 0 {
			// PostgreSQL's jsonb cannot store U+0000: refused here, not
			// answered 503 on every retry.
			return &FieldError{Field: "metadata", Problem: "value of " + strconv.Quote(k) + " must not contain U+0000"}
		}
	}
	return nil
}

func metadataKey(k string) bool {
	if len(k) < 1 || len(k) > MaxMetadataKeyLen {
		return false
	}
	for i := range len(k) {
		if !metadataKeyByte(k[i]) {
			return false
		}
	}
	return true
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

// startsAt reads an RFC 3339 start: zero when none is given, at most 7 days
// after now, to the millisecond. A start already past means now: a client's
// clock a little ahead of ours is no error.
func startsAt(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, ok := parseRFC3339(s)
	if !ok {
		return time.Time{}, &FieldError{Field: "starts_at", Problem: "must be an RFC 3339 time, e.g. 2026-11-21T10:00:00Z"}
	}
	now = now.UTC().Truncate(time.Millisecond)
	t = t.UTC().Truncate(time.Millisecond)
	if t.After(now.Add(MaxStartsAhead)) {
		return time.Time{}, &FieldError{Field: "starts_at", Problem: "must be at most 7 days ahead"}
	}
	if t.Before(now) {
		t = now
	}
	return t, nil
}

// rfc3339Shape is RFC 3339's date-time with at most 9 fractional digits
// (a nanosecond) and an uppercase T and Z, as the API's examples and its
// answers write them (RFC 3339 §5.6 lets a format require that).
var rfc3339Shape = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-](\d\d):(\d\d))$`)

// parseRFC3339 reads an RFC 3339 date-time, and nothing else: time.Parse
// alone also takes a comma for the decimal point, any number of fractional
// digits and offsets such as +24:00, which other RFC 3339 readers (the
// client's own, a log's) would refuse or read otherwise.
func parseRFC3339(s string) (time.Time, bool) {
	m := rfc3339Shape.FindStringSubmatch(s)
	if m == nil || m[1] != "" && (m[1] > "23" || m[2] > "59") {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// PasswordDigest is what is kept of an envelope's password and compared
// with a grab's: the lowercase hex SHA-256 of "<envelope id>:<password>".
// The id makes one password's digests differ between envelopes.
func PasswordDigest(envelopeID int64, password string) string {
	h := sha256.Sum256([]byte(strconv.FormatInt(envelopeID, 10) + ":" + password))
	return hex.EncodeToString(h[:])
}

// metadataKeyByte reports whether c may appear in a metadata key:
// [A-Za-z0-9_.-].
func metadataKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}
