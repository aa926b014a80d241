package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// maxSafeInt is 2^53-1: IDs stay below it so they are exact JSON numbers.
const maxSafeInt = 1<<53 - 1

func TestCreateShape(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	setClock(s, time.Date(2026, 11, 21, 10, 0, 0, 123_456_789, time.UTC))

	a := c.do("POST", "/v1/envelopes", `{"sender_id":"u-1","total_cents":10000,"count":100,"expires_in_seconds":3600}`)
	if a.Status != http.StatusCreated {
		t.Fatalf("create: %s, want 201", a)
	}
	requireKeys(t, a, "envelope_id", "share_code", "sender_id", "total_cents", "count", "status", "expires_at",
		"kind", "recipients_count", "has_password", "greeting", "metadata", "starts_at", "split_commitment")
	var r createResponse
	requireJSON(t, a, &r)
	// yyMMdd of the creation day, then 5 digits.
	if len(r.ShareCode) != 11 || r.ShareCode[:6] != "261121" || strings.Trim(r.ShareCode, "0123456789") != "" {
		t.Errorf("share_code = %q, want 261121 + 5 digits", r.ShareCode)
	}
	var byCode statusResponse
	if b := c.do("GET", "/v1/envelopes/by-code/"+r.ShareCode, ""); b.Status != http.StatusOK {
		t.Errorf("status by share code: %s", b)
	} else if requireJSON(t, b, &byCode); byCode.EnvelopeID != r.EnvelopeID || byCode.ShareCode != r.ShareCode {
		t.Errorf("status by share code %s answered envelope %d (%q)", r.ShareCode, byCode.EnvelopeID, byCode.ShareCode)
	}
	if r.EnvelopeID <= 0 || r.EnvelopeID > maxSafeInt {
		t.Errorf("envelope_id = %d, want in [1, 2^53)", r.EnvelopeID)
	}
	if r.SenderID != "u-1" || r.TotalCents != 10000 || r.Count != 100 || r.Status != "open" {
		t.Errorf("create answer %+v does not echo the request with status open", r)
	}
	// Created at 10:00:00.123 (the clock's nanoseconds dropped), plus 3600 s.
	if r.ExpiresAt != "2026-11-21T11:00:00.123Z" {
		t.Errorf("expires_at = %q, want 2026-11-21T11:00:00.123Z", r.ExpiresAt)
	}
	// The status endpoint reports the same instants.
	st := c.status(r.EnvelopeID)
	if st.CreatedAt != "2026-11-21T10:00:00.123Z" || st.ExpiresAt != r.ExpiresAt {
		t.Errorf("status created_at %q expires_at %q, want 2026-11-21T10:00:00.123Z and %q",
			st.CreatedAt, st.ExpiresAt, r.ExpiresAt)
	}
	if st.EnvelopeID != r.EnvelopeID || st.SenderID != "u-1" || st.TotalCents != 10000 || st.Count != 100 ||
		st.Status != "open" || st.GrabbedCount != 0 || st.GrabbedCents != 0 || st.RemainingCount != 100 ||
		st.RefundedCents != 0 || st.SettledAt != nil {
		t.Errorf("status of a new envelope: %+v", st)
	}

	// Two creates get two different ids.
	if r2 := c.create(`{"sender_id":"u-1","total_cents":1,"count":1}`); r2.EnvelopeID == r.EnvelopeID {
		t.Errorf("two creates got the same envelope_id %d", r.EnvelopeID)
	}
}

func TestCreateDefaultExpiry(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	setClock(s, time.Date(2026, 2, 28, 23, 59, 59, 999_999_999, time.UTC))
	for _, body := range []string{
		`{"sender_id":"u-1","total_cents":100,"count":10}`,
		`{"sender_id":"u-1","total_cents":100,"count":10,"expires_in_seconds":null}`,
	} {
		r := c.create(body)
		if r.ExpiresAt != "2026-03-01T23:59:59.999Z" {
			t.Errorf("%s: expires_at = %q, want 2026-03-01T23:59:59.999Z (86400 s later)", body, r.ExpiresAt)
		}
	}
}

// TestCreateAcceptsBoundaries creates at the edges of every rule.
func TestCreateAcceptsBoundaries(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	allowed := "azAZ09_.:@-"
	id64 := allowed + strings.Repeat("x", 64-len(allowed))
	for _, tc := range []struct {
		name, body, sender string
		total              int64
		count              int
		seconds            int64
	}{
		{"sender_id 1 char", `{"sender_id":"a","total_cents":5,"count":5,"expires_in_seconds":60}`, "a", 5, 5, 60},
		{"sender_id 64 chars of every class", `{"sender_id":"` + id64 + `","total_cents":5,"count":1,"expires_in_seconds":60}`, id64, 5, 1, 60},
		{"total_cents equals count", `{"sender_id":"u-1","total_cents":1000,"count":1000,"expires_in_seconds":60}`, "u-1", 1000, 1000, 60},
		{"total_cents at max", `{"sender_id":"u-1","total_cents":100000000,"count":5000,"expires_in_seconds":60}`, "u-1", 100000000, 5000, 60},
		{"total_cents at count × MAX_PACKET_CENTS", `{"sender_id":"u-1","total_cents":40000,"count":2,"expires_in_seconds":60}`, "u-1", 40000, 2, 60},
		{"expires_in_seconds 1", `{"sender_id":"u-1","total_cents":5,"count":1,"expires_in_seconds":1}`, "u-1", 5, 1, 1},
		{"expires_in_seconds 7 days", `{"sender_id":"u-1","total_cents":5,"count":1,"expires_in_seconds":604800}`, "u-1", 5, 1, 604800},
		{"fields in another order, whitespace around", " \n{\"count\":1,\"expires_in_seconds\":60,\"total_cents\":5,\"sender_id\":\"u-1\"}\n ", "u-1", 5, 1, 60},
		{"body of exactly 256 KiB", padded(`"sender_id":"u-1","total_cents":5,"count":1,"expires_in_seconds":60`, maxCreateBody), "u-1", 5, 1, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := c.create(tc.body)
			if r.SenderID != tc.sender || r.TotalCents != tc.total || r.Count != tc.count || r.Status != "open" {
				t.Errorf("answer %+v does not echo the request", r)
			}
			// The clock does not move in this test.
			want := s.Clock.Now().UTC().Truncate(time.Millisecond).Add(time.Duration(tc.seconds) * time.Second)
			if got := parseTime(t, "expires_at", r.ExpiresAt); !got.Equal(want) {
				t.Errorf("expires_at = %s, want %s", got, want)
			}
			if st := c.status(r.EnvelopeID); st.RemainingCount != int64(tc.count) {
				t.Errorf("remaining %d, want %d", st.RemainingCount, tc.count)
			}
		})
	}
}

func TestGrabShape(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	setClock(s, time.Date(2026, 11, 21, 10, 0, 1, 123_900_000, time.UTC))
	env := c.createN(1000, 10, 3600)

	a := c.grabAnswer(env.EnvelopeID, "u-42")
	if a.Status != http.StatusOK {
		t.Fatalf("grab: %s, want 200", a)
	}
	requireKeys(t, a, "envelope_id", "packet_id", "amount_cents", "order_no", "grabbed_at", "repeat")
	var g grabResponse
	requireJSON(t, a, &g)
	// yyyyMMdd of the grab's day, then 10 digits.
	if len(g.OrderNo) != 18 || g.OrderNo[:8] != "20261121" || strings.Trim(g.OrderNo, "0123456789") != "" {
		t.Errorf("order_no = %q, want 20261121 + 10 digits", g.OrderNo)
	}
	if g.EnvelopeID != env.EnvelopeID {
		t.Errorf("envelope_id = %d, want %d", g.EnvelopeID, env.EnvelopeID)
	}
	if g.PacketID <= 0 || g.PacketID > maxSafeInt {
		t.Errorf("packet_id = %d, want in [1, 2^53)", g.PacketID)
	}
	// Every other packet keeps at least 1 cent.
	if g.AmountCents < 1 || g.AmountCents > 1000-9 {
		t.Errorf("amount_cents = %d, want in [1, 991]", g.AmountCents)
	}
	if g.GrabbedAt != "2026-11-21T10:00:01.123Z" || g.Repeat {
		t.Errorf("grabbed_at %q repeat %v, want 2026-11-21T10:00:01.123Z false", g.GrabbedAt, g.Repeat)
	}

	// Later, the same user gets the same packet and its first time.
	s.Clock.Advance(5 * time.Second)
	again := c.grab(env.EnvelopeID, "u-42")
	if !again.Repeat || again.PacketID != g.PacketID || again.AmountCents != g.AmountCents || again.GrabbedAt != g.GrabbedAt ||
		again.OrderNo != g.OrderNo {
		t.Errorf("repeat: %+v, want %+v with repeat true", again, g)
	}
	other := c.grab(env.EnvelopeID, "u-43")
	if other.Repeat || other.PacketID == g.PacketID || other.GrabbedAt != "2026-11-21T10:00:06.123Z" {
		t.Errorf("another user: %+v, want a new packet grabbed at 10:00:06.123", other)
	}
}

func TestStatusCounts(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	env := c.createN(1000, 10, 3600)

	a := c.do("GET", statusPath(env.EnvelopeID), "")
	k := keys(t, a)
	for _, f := range []string{"envelope_id", "sender_id", "status", "total_cents", "count", "grabbed_count",
		"grabbed_cents", "remaining_count", "refunded_cents", "created_at", "expires_at"} {
		if !k[f] {
			t.Errorf("status answer lacks %q: %s", f, a)
		}
	}

	var sum int64
	packets := map[int64]bool{}
	for i := range 4 {
		g := c.grab(env.EnvelopeID, fmt.Sprintf("user-%d", i))
		sum += g.AmountCents
		if packets[g.PacketID] {
			t.Errorf("packet %d handed out twice", g.PacketID)
		}
		packets[g.PacketID] = true
	}
	c.grab(env.EnvelopeID, "user-0") // a repeat changes nothing
	st := c.status(env.EnvelopeID)
	if st.GrabbedCount != 4 || st.GrabbedCents != sum || st.RemainingCount != 6 || st.Status != "open" {
		t.Errorf("after 4 grabs of %d cents: %+v", sum, st)
	}
	if st.GrabbedCount+st.RemainingCount != int64(st.Count) {
		t.Errorf("grabbed %d + remaining %d != count %d", st.GrabbedCount, st.RemainingCount, st.Count)
	}

	for i := 4; i < 10; i++ {
		sum += c.grab(env.EnvelopeID, fmt.Sprintf("user-%d", i)).AmountCents
	}
	st = c.status(env.EnvelopeID)
	if sum != 1000 || st.GrabbedCount != 10 || st.GrabbedCents != 1000 || st.RemainingCount != 0 || st.Status != "sold_out" {
		t.Errorf("after every grab (amounts sum to %d, want 1000): %+v", sum, st)
	}

	// Expired and closed while its last claims wait for the flusher (which
	// records sold_out once they are written): still sold out.
	s.Clock.Advance(2 * time.Hour)
	if _, err := s.Pool.Exec(t.Context(), `UPDATE envelopes SET status = 'expired' WHERE id = $1`, env.EnvelopeID); err != nil {
		t.Fatal(err)
	}
	if st = c.status(env.EnvelopeID); st.Status != "sold_out" || st.RemainingCount != 0 {
		t.Errorf("expired with every packet granted: %+v, want sold_out", st)
	}
}

func TestExpiryBoundary(t *testing.T) {
	t.Parallel()
	s, c := newClient(t)
	env := c.createN(1000, 10, 10)
	expiresAt := parseTime(t, "expires_at", env.ExpiresAt)

	setClock(s, expiresAt.Add(-time.Millisecond))
	c.grab(env.EnvelopeID, "early")

	setClock(s, expiresAt)
	g := c.grab(env.EnvelopeID, "on-time")
	if g.GrabbedAt != env.ExpiresAt {
		t.Errorf("grab at expires_at: grabbed_at %q, want %q", g.GrabbedAt, env.ExpiresAt)
	}
	if st := c.status(env.EnvelopeID); st.Status != "open" {
		t.Errorf("status at expires_at = %q, want open", st.Status)
	}

	s.Clock.Advance(time.Millisecond)
	requireError(t, c.grabAnswer(env.EnvelopeID, "late"), http.StatusConflict, "expired")
	if st := c.status(env.EnvelopeID); st.Status != "expired" || st.GrabbedCount != 2 || st.RemainingCount != 8 {
		t.Errorf("status 1 ms after expires_at: %+v", st)
	}
}
