package redisstore

import (
	"testing"
	"time"
)

// TestCodecRoundTrip: what the Go side writes compactly (Reload) reads back
// the same, whatever the order number's length, and a queue entry renders
// as the text operators know.
func TestCodecRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1_795_000_000_123).UTC()
	for _, order := range []string{"", "7", "20261123", "202611230000000042", "2026112300000000421"} {
		c := Claim{PacketID: 1<<53 - 1, AmountCents: 1, GrabbedAt: at, OrderNo: order}
		got, err := parseClaim(string(appendClaim(nil, c)))
		if err != nil || got != c {
			t.Errorf("claim with order %q read back as %+v, %v", order, got, err)
		}
	}
	q := QueuedClaim{EnvelopeID: 300, PacketID: 12345678, AmountCents: 250, UserID: "u:1 ü",
		GrabbedAt: at, OrderNo: "202611230000000042"}
	raw := string(appendQueued(nil, q))
	if got, err := ParseQueued(raw); err != nil || got != q {
		t.Errorf("queued %+v read back as %+v, %v", q, got, err)
	}
	if want := "300:12345678:250:1795000000123:202611230000000042:u:1 ü"; renderQueued(raw) != want {
		t.Errorf("rendered %q, want %q", renderQueued(raw), want)
	}
	for _, bad := range []string{"\x01", "\x01\x00\x01\x01\xff", "\x01\x05\x01\x80", "\x01\x05\x01\x01\xaa\xff"} {
		if c, err := parseClaim(bad); err == nil {
			t.Errorf("claim %q read as %+v", bad, c)
		}
	}
	if _, err := ParseQueued("\x01\x05\x05\x01\x01\x12\xff"); err == nil {
		t.Error("a queue entry without its user was read")
	}
}
