package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	rs "redpacket/internal/redisscript"
)

func TestParseQueued(t *testing.T) {
	t.Parallel()
	valid := []struct {
		raw  string
		want QueuedClaim
	}{
		{"1:2:3:4:9:u", QueuedClaim{EnvelopeID: 1, PacketID: 2, AmountCents: 3, GrabbedAt: time.UnixMilli(4).UTC(), OrderNo: "9", UserID: "u"}},
		{"1001:9007199254740991:100000000:1700000000123:202611210000000123:wx:abc@corp",
			QueuedClaim{EnvelopeID: 1001, PacketID: 1<<53 - 1, AmountCents: 100000000,
				GrabbedAt: time.UnixMilli(1700000000123).UTC(), OrderNo: "202611210000000123", UserID: "wx:abc@corp"}},
		{"1:2:3:4:9::", QueuedClaim{EnvelopeID: 1, PacketID: 2, AmountCents: 3, GrabbedAt: time.UnixMilli(4).UTC(), OrderNo: "9", UserID: ":"}},
		{"1:2:3:4:5:6:7", QueuedClaim{EnvelopeID: 1, PacketID: 2, AmountCents: 3, GrabbedAt: time.UnixMilli(4).UTC(), OrderNo: "5", UserID: "6:7"}},
		{"1:2:3:4:9: ", QueuedClaim{EnvelopeID: 1, PacketID: 2, AmountCents: 3, GrabbedAt: time.UnixMilli(4).UTC(), OrderNo: "9", UserID: " "}},
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
		"1:2:3:4",    // no order number, no user
		"1:2:3:4:9",  // no user
		"1:2:3:4:9:", // empty user
		"1:2:3:4::u", // empty order number
		"1:2:3:4:x:u",
		"1:2:3::9:u",
		":::::u",
		"a:2:3:4:9:u",
		"1:b:3:4:9:u",
		"1:2:c:4:9:u",
		"1:2:3:d:9:u",
		"1.5:2:3:4:9:u",
		" 1:2:3:4:9:u",
		"1 :2:3:4:9:u",
		"1:2:3:4.0:9:u",
		"99999999999999999999:2:3:4:9:u", // overflows int64
		"1:2:3:4",
	} {
		if got, err := ParseQueued(raw); err == nil {
			t.Errorf("ParseQueued(%q) = %+v, want an error", raw, got)
		}
	}
}

func TestParseClaim(t *testing.T) {
	t.Parallel()
	got, err := parseClaim("12:34:1700000000999:202611210000000001")
	want := Claim{PacketID: 12, AmountCents: 34, GrabbedAt: time.UnixMilli(1700000000999).UTC(), OrderNo: "202611210000000001"}
	if err != nil || got != want {
		t.Errorf("parseClaim = %+v, %v; want %+v", got, err, want)
	}
	// A claim restored from a PostgreSQL row without an order number.
	if got, err := parseClaim("1:2:3:"); err != nil || got.OrderNo != "" || got.PacketID != 1 {
		t.Errorf("parseClaim(%q) = %+v, %v; want packet 1 without order number", "1:2:3:", got, err)
	}
	for _, raw := range []string{
		"", ":", "::", "1", "1:2", "1:2:", "1:2:3", "1:2:3:4:", "1:2:3:4:5", "1:2:x:4", "x:2:3:4",
		"1::3:4", "1:2:3:4 ", "1:2:3:u",
	} {
		if got, err := parseClaim(raw); err == nil {
			t.Errorf("parseClaim(%q) = %+v, want an error", raw, got)
		}
	}
}

func TestGrabOutcomes(t *testing.T) {
	t.Parallel()
	claim := func(code any, raw any) (Claim, error) { return grabReply{code: code, raw: raw}.claim() }
	c, err := claim(int64(grabGranted), "5:6:7:8")
	if err != nil || c != (Claim{PacketID: 5, AmountCents: 6, GrabbedAt: time.UnixMilli(7).UTC(), OrderNo: "8"}) {
		t.Errorf("granted = %+v, %v", c, err)
	}
	c, err = claim(int64(grabRepeat), "5:6:7:8")
	if err != nil || !c.Repeat || c.PacketID != 5 {
		t.Errorf("repeat = %+v, %v", c, err)
	}
	for code, want := range map[rs.Code]error{grabNotLoaded: ErrNotLoaded, grabClosed: ErrClosed, grabSoldOut: ErrSoldOut,
		grabSuspended: ErrSuspended, grabBadState: ErrBadState} {
		if _, err := claim(int64(code), ""); err != want {
			t.Errorf("code %d: %v, want %v", code, err, want)
		}
	}
	// A grab waiting for a number carries the call's error; without one the
	// reply contradicts itself. Unknown codes and shapes are errors too.
	for _, r := range []grabReply{
		{code: int64(grabAwaiting), raw: ""}, {code: int64(99), raw: ""}, {code: int64(grabGranted), raw: "bad"},
		{code: "0", raw: "5:6:7:8"}, {code: int64(grabGranted), raw: int64(5)}, {code: nil, raw: nil},
	} {
		if c, err := r.claim(); err == nil {
			t.Errorf("%#v: %+v, no error", r, c)
		}
	}
}

// TestGrabCallShapes: a reply of grab.lua that is not {code, {info, n pairs}}
// fails every grab of the call with an error, never a zero claim.
func TestGrabCallShapes(t *testing.T) {
	t.Parallel()
	s := New(nil, "p", 4)
	newMemNumbering(s, 10, 100, time.UTC)
	sc := &shardCall{grabs: []*pendingGrab{{call: s.newGrab(1, "a", time.Now(), 1)}, {call: s.newGrab(5, "b", time.Now(), 1)}}}
	pair := []any{int64(grabGranted), "5:6:7:8"}
	for _, v := range []any{
		nil, int64(0), "x", []any{}, []any{int64(grabDone)}, []any{"0", []any{int64(0)}},
		[]any{int64(grabDone), []any{int64(3)}},                                            // no pairs
		[]any{int64(grabDone), append([]any{int64(3)}, pair...)},                           // one pair for two grabs
		[]any{int64(42), append(append([]any{int64(3)}, pair...), pair...)},                // unknown call code
		[]any{int64(grabFence), append(append([]any{int64(3)}, pair...), pair...)},         // fence without identity
		[]any{int64(grabDone), []any{int64(3), int64(grabAwaiting), "", pair[0], pair[1]}}, // awaiting in a done call
	} {
		cmd := redis.NewCmd(context.Background())
		cmd.SetVal(v)
		sc.cmd = cmd
		for i, r := range s.replies(sc) {
			if c, err := r.claim(); err == nil && (i == 0 || v == nil) {
				t.Errorf("reply %#v: grab %d answered %+v without error", v, i, c)
			}
		}
	}
}
