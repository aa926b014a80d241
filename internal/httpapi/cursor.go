package httpapi

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"redpacket/internal/grab"
)

// Cursors are opaque to clients: base64url (no padding) of a version, the
// list they page and the key of the last item seen. A cursor of another
// list, or one that does not parse, is 400. So is any spelling the server
// never gives out ("+10", "010", "-0", stray bits or line breaks in the
// base64): a cursor is taken only if encoding what it holds gives it back,
// so each key has exactly one cursor.
const cursorVersion = "1"

// claimsCursor is the key after which GET /v1/envelopes/{id}/claims goes
// on: the envelope and the packet last listed (0: none yet).
func claimsCursor(envelopeID, packetID int64) string {
	return encodeCursor("e", strconv.FormatInt(envelopeID, 10), strconv.FormatInt(packetID, 10))
}

func parseClaimsCursor(s string, envelopeID int64) (int64, error) {
	parts, ok := decodeCursor(s, "e", 2)
	if !ok || parts[0] != strconv.FormatInt(envelopeID, 10) {
		return 0, badRequest("after: not a cursor of this envelope's claims")
	}
	id, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || id < 0 || claimsCursor(envelopeID, id) != s {
		return 0, badRequest("after: not a cursor of this envelope's claims")
	}
	return id, nil
}

// timeCursor is the key before which a newest-first list goes on: the time
// (in microseconds, PostgreSQL's precision) and id of the last item listed.
func timeCursor(list string, at time.Time, id int64) string {
	return encodeCursor(list, strconv.FormatInt(at.UnixMicro(), 10), strconv.FormatInt(id, 10))
}

// maxCursorMicros is the last microsecond of the year 9999: no list's time
// lies past it, nor before 1970.
const maxCursorMicros = 253402300799999999

func parseTimeCursor(s, list string) (time.Time, int64, error) {
	bad := badRequest("before: not a cursor of this list")
	parts, ok := decodeCursor(s, list, 2)
	if !ok {
		return time.Time{}, 0, bad
	}
	us, err1 := strconv.ParseInt(parts[0], 10, 64)
	id, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || id <= 0 || us < 0 || us > maxCursorMicros {
		// (A time PostgreSQL cannot hold would fail the query: answered
		// 503, not 400.)
		return time.Time{}, 0, bad
	}
	at := time.UnixMicro(us).UTC()
	if timeCursor(list, at, id) != s {
		return time.Time{}, 0, bad
	}
	return at, id, nil
}

// historyCursor is the key before which a user's history goes on: the
// envelope of the last claim listed (a user holds one packet per envelope).
func historyCursor(envelopeID int64) string {
	return encodeCursor("h", strconv.FormatInt(envelopeID, 10))
}

// parseHistoryCursor reads a cursor of a user's history. One given out while
// histories were read by grab time ("u": a time and a packet) is refused
// with a word on why: no page by envelope can go on from it without
// skipping claims (those grabbed earlier in newer envelopes).
func parseHistoryCursor(s string) (grab.HistoryKey, error) {
	parts, ok := decodeCursor(s, "h", 1)
	if !ok {
		if _, _, err := parseTimeCursor(s, "u"); err == nil {
			return grab.HistoryKey{}, badRequest("before: a cursor from before histories were listed by envelope; start again from the first page")
		}
		return grab.HistoryKey{}, badRequest("before: not a cursor of this list")
	}
	id, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || id <= 0 || historyCursor(id) != s {
		return grab.HistoryKey{}, badRequest("before: not a cursor of this list")
	}
	return grab.HistoryKey{Envelope: id}, nil
}

func encodeCursor(list string, fields ...string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + ":" + list + ":" + strings.Join(fields, ":")))
}

func decodeCursor(s, list string, n int) ([]string, bool) {
	if s == "" || len(s) > 128 {
		return nil, false
	}
	// No cursor holds a line break, but the decoder skips them even when
	// strict (which refuses stray trailing bits).
	if strings.ContainsAny(s, "\r\n") {
		return nil, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, false
	}
	parts := strings.Split(string(b), ":")
	if len(parts) != n+2 || parts[0] != cursorVersion || parts[1] != list {
		return nil, false
	}
	return parts[2:], true
}
