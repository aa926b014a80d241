package httpapi_test

import (
	"net/http"
	"testing"

	"redpacket/internal/grab"
	"redpacket/internal/httpapi"
	"redpacket/internal/limits"
	"redpacket/internal/testenv/stack"
)

// limitedClient is the API over a stack whose service has the limits c.
func limitedClient(t *testing.T, c limits.Config) (*stack.Stack, client) {
	t.Helper()
	s := stack.New(t)
	cfg := s.Config
	cfg.Safety.Limiter = limits.New(s.RDB, s.Redis.Keys(), c)
	return s, client{t: t, h: httpapi.New(grab.New(cfg), httpapi.Options{})}
}

// Past USER_GRAB_RATE a grab is 429 rate_limited with Retry-After in whole
// seconds; past USER_DAILY_GRABS, 403 limit_exceeded; a holder's repeat is
// 200 either way.
func TestGrabLimitsAnswers(t *testing.T) {
	t.Parallel()
	_, c := limitedClient(t, limits.Config{UserGrabRate: 1, UserDailyGrabs: 2})
	a, b := c.createN(100, 10, 600), c.createN(100, 10, 600)
	held := c.grab(a.EnvelopeID, "u-1")
	ans := c.grabAnswer(b.EnvelopeID, "u-1")
	requireError(t, ans, http.StatusTooManyRequests, "rate_limited")
	if got := ans.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	if again := c.grab(a.EnvelopeID, "u-1"); !again.Repeat || again.PacketID != held.PacketID {
		t.Errorf("holder's repeat while rate limited: %+v", again)
	}
	_, c2 := limitedClient(t, limits.Config{UserDailyGrabs: 1})
	e, f := c2.createN(100, 10, 600), c2.createN(100, 10, 600)
	c2.grab(e.EnvelopeID, "u-2")
	requireError(t, c2.grabAnswer(f.EnvelopeID, "u-2"), http.StatusForbidden, "limit_exceeded")
	if again := c2.grab(e.EnvelopeID, "u-2"); !again.Repeat {
		t.Errorf("holder's repeat past the day's cap: %+v", again)
	}
}

// Past SENDER_DAILY_CENTS a create is 403 limit_exceeded.
func TestCreateSenderLimitAnswer(t *testing.T) {
	t.Parallel()
	s, c := limitedClient(t, limits.Config{SenderDailyCents: 150})
	c.createN(100, 1, 600)
	requireError(t, c.do(http.MethodPost, "/v1/envelopes", `{"sender_id":"sender-1","total_cents":51,"count":1}`),
		http.StatusForbidden, "limit_exceeded")
	if n := envelopeRows(t, s); n != 1 {
		t.Errorf("%d envelopes, want 1", n)
	}
}
