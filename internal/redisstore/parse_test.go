package redisstore

import (
	"testing"
	"time"
)

func TestParseQueued(t *testing.T) {
	t.Parallel()
	valid := []struct {
		raw  string
		want QueuedClaim
	}{
		{"1:2:3:4:u", QueuedClaim{EnvelopeID: 1, PacketID: 2, AmountCents: 3, GrabbedAt: time.UnixMilli(4).UTC(), UserID: "u"}},
		{"1001:9007199254740991:100000000:1700000000123:wx:abc@corp",
			QueuedClaim{EnvelopeID: 1001, PacketID: 1<<53 - 1, AmountCents: 100000000,
				GrabbedAt: time.UnixMilli(1700000000123).UTC(), UserID: "wx:abc@corp"}},
		{"1:2:3:4::", QueuedClaim{EnvelopeID: 1, PacketID: 2, AmountCents: 3, GrabbedAt: time.UnixMilli(4).UTC(), UserID: ":"}},
		{"1:2:3:4:5:6:7", QueuedClaim{EnvelopeID: 1, PacketID: 2, AmountCents: 3, GrabbedAt: time.UnixMilli(4).UTC(), UserID: "5:6:7"}},
		{"1:2:3:4: ", QueuedClaim{EnvelopeID: 1, PacketID: 2, AmountCents: 3, GrabbedAt: time.UnixMilli(4).UTC(), UserID: " "}},
	}
	for _, c := range valid {
		got, err := ParseQueued(c.raw)
		if err != nil || got != c.want {
			t.Errorf("ParseQueued(%q) = %+v, %v; want %+v", c.raw, got, err, c.want)
		}
		if got.GrabbedAt.Location() != time.UTC {
			t.Errorf("ParseQueued(%q): GrabbedAt not in UTC", c.raw)
		}
	}
	for _, raw := range []string{
		"",
		":",
		"1",
		"1:2",
		"1:2:3",
		"1:2:3:4",  // no user
		"1:2:3:4:", // empty user
		"1:2:3::u",
		"::::u",
		"a:2:3:4:u",
		"1:b:3:4:u",
		"1:2:c:4:u",
		"1:2:3:d:u",
		"1.5:2:3:4:u",
		" 1:2:3:4:u",
		"1 :2:3:4:u",
		"1:2:3:4.0:u",
		"99999999999999999999:2:3:4:u", // overflows int64
		"1:2:3:4",
	} {
		if got, err := ParseQueued(raw); err == nil {
			t.Errorf("ParseQueued(%q) = %+v, want an error", raw, got)
		}
	}
}

func TestParseClaim(t *testing.T) {
	t.Parallel()
	got, err := parseClaim("12:34:1700000000999")
	want := Claim{PacketID: 12, AmountCents: 34, GrabbedAt: time.UnixMilli(1700000000999).UTC()}
	if err != nil || got != want {
		t.Errorf("parseClaim = %+v, %v; want %+v", got, err, want)
	}
	for _, raw := range []string{
		"", ":", "::", "1", "1:2", "1:2:", "1:2:3:", "1:2:3:4", "1:2:x", "x:2:3", "1::3", "1:2:3 ", "1:2:3:u",
	} {
		if got, err := parseClaim(raw); err == nil {
			t.Errorf("parseClaim(%q) = %+v, want an error", raw, got)
		}
	}
}

func TestParseGrabReply(t *testing.T) {
	t.Parallel()
	c, err := parseGrabReply([]any{int64(grabGranted), "5:6:7"})
	if err != nil || c != (Claim{PacketID: 5, AmountCents: 6, GrabbedAt: time.UnixMilli(7).UTC()}) {
		t.Errorf("granted = %+v, %v", c, err)
	}
	c, err = parseGrabReply([]any{int64(grabRepeat), "5:6:7"})
	if err != nil || !c.Repeat || c.PacketID != 5 {
		t.Errorf("repeat = %+v, %v", c, err)
	}
	for code, want := range map[int64]error{grabNotLoaded: ErrNotLoaded, grabClosed: ErrClosed, grabSoldOut: ErrSoldOut} {
		if _, err := parseGrabReply([]any{code}); err != want {
			t.Errorf("code %d: %v, want %v", code, err, want)
		}
	}
	if _, err := parseGrabReply([]any{int64(99)}); err == nil {
		t.Errorf("unknown code: no error")
	}
	if _, err := parseGrabReply([]any{int64(grabGranted), "bad"}); err == nil {
		t.Errorf("granted with a malformed claim: no error")
	}
}
