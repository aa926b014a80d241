package httpapi

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// rawCursor spells a cursor's text the way the server does, whatever the
// text: the odd spellings below are refused for what they say, not for
// their base64.
func rawCursor(text string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(text))
}

// A cursor is accepted only as the server spells it: another spelling of
// the same key ("+10", "010", "-0"), stray bits at the end of the base64 or
// a line break in it is 400, so a client cannot come to rely on one.
func TestCursorOnlyInTheSpellingGivenOut(t *testing.T) {
	real := claimsCursor(1001, 10)
	if real != "MTplOjEwMDE6MTA" {
		t.Fatalf("claims cursor of envelope 1001 after packet 10: %q", real)
	}
	if id, err := parseClaimsCursor(real, 1001); err != nil || id != 10 {
		t.Fatalf("the real cursor: %d, %v", id, err)
	}
	if id, err := parseClaimsCursor(claimsCursor(1001, 0), 1001); err != nil || id != 0 {
		t.Fatalf("the cursor of an empty page: %d, %v", id, err)
	}
	for _, bad := range []string{
		rawCursor("1:e:1001:+10"), rawCursor("1:e:1001:010"), rawCursor("1:e:1001:-0"),
		rawCursor("1:e:+1001:10"), rawCursor("1:e:01001:10"), rawCursor("1:e:1001:00"),
		"MTplOjEwMDE6MTB", // the last character's unused bits set
		real + "\n", real + "\r", real[:4] + "\n" + real[4:], real[:4] + "\r\n" + real[4:],
		real + "=", real + "A",
	} {
		if _, err := parseClaimsCursor(bad, 1001); err == nil {
			t.Errorf("claims cursor %q accepted", bad)
		}
	}

	at := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	sender := timeCursor("s", at, 42)
	if gotAt, id, err := parseTimeCursor(sender, "s"); err != nil || !gotAt.Equal(at) || id != 42 {
		t.Fatalf("the real sender cursor: %v, %d, %v", gotAt, id, err)
	}
	us := "1714979289123456"
	for _, bad := range []string{
		rawCursor("1:s:+" + us + ":42"), rawCursor("1:s:0" + us + ":42"), rawCursor("1:s:" + us + ":042"),
		rawCursor("1:s:" + us + ":+42"), rawCursor("1:s:-0:42"), sender + "\n",
	} {
		if _, _, err := parseTimeCursor(bad, "s"); err == nil {
			t.Errorf("sender cursor %q accepted", bad)
		}
	}
	// The epoch is a time a cursor can hold, spelled "0" only.
	if _, _, err := parseTimeCursor(rawCursor("1:s:0:42"), "s"); err != nil {
		t.Errorf("sender cursor at the epoch: %v", err)
	}

	history := historyCursor(77)
	if k, err := parseHistoryCursor(history); err != nil || k.Envelope != 77 {
		t.Fatalf("the real history cursor: %+v, %v", k, err)
	}
	// The history cursor given out while histories were by grab time is
	// refused, saying so.
	legacy := timeCursor("u", at, 9)
	if _, err := parseHistoryCursor(legacy); err == nil || !strings.Contains(err.Error(), "first page") {
		t.Fatalf("the legacy history cursor: %v; want it refused, saying to start from the first page", err)
	}
	for _, bad := range []string{
		rawCursor("1:h:+77"), rawCursor("1:h:077"), history + "\n",
		rawCursor("1:u:+" + us + ":9"), rawCursor("1:u:" + us + ":09"), legacy + "\r\n",
	} {
		if _, err := parseHistoryCursor(bad); err == nil {
			t.Errorf("history cursor %q accepted", bad)
		}
	}
}
