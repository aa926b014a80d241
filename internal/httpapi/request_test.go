package httpapi_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"redpacket/internal/httpapi"
	"redpacket/internal/telemetry"
	"redpacket/internal/testenv/stack"
)

var generatedID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// X-Request-Id: a client's id of 1 to 128 visible ASCII characters comes
// back as it was sent; any other is replaced, and a request without one gets
// one, on every answer (errors, probes and 401s included).
func TestRequestID(t *testing.T) {
	t.Parallel()
	_, c := newAuthClient(t)
	valid := []string{"abc-123", "x", strings.Repeat("~", 128), `!"#$%&'()*+,-./0123456789:;<=>?@[\]^_{|}~`,
		"0f8fad5b-d9cb-469f-a165-70867728950e"}
	for _, id := range valid {
		for _, path := range []string{"/healthz", "/v1/envelopes/1", "/nope"} {
			a := c.doHeaders("GET", path, "", map[string]string{"X-Request-Id": id})
			if got := a.Header.Values("X-Request-Id"); len(got) != 1 || got[0] != id {
				t.Errorf("GET %s with X-Request-Id %q: answer has %q", path, id, got)
			}
		}
	}
	invalid := []string{"", "two words", strings.Repeat("a", 129), "caf\u00e9", "tab\there", "nul\x00", "del\x7f"}
	seen := map[string]bool{}
	for _, id := range invalid {
		h := map[string]string{}
		if id != "" {
			h["X-Request-Id"] = id
		}
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/healthz", ""}, {"POST", "/v1/envelopes", `{}`}, {"DELETE", "/readyz", ""},
		} {
			a := c.doHeaders(r.method, r.path, r.body, h)
			got := a.Header.Get("X-Request-Id")
			if !generatedID.MatchString(got) {
				t.Errorf("%s %s with X-Request-Id %q: answered with %q, want a generated id (32 hex digits)",
					r.method, r.path, id, got)
			}
			if seen[got] {
				t.Errorf("id %s generated twice", got)
			}
			seen[got] = true
		}
	}
}

// observed returns a logger at level and what it logged.
func observed(level zapcore.Level) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(level)
	return zap.New(core), logs
}

// Every line logged while serving a request carries its id: here the
// error line of a request that failed and the panic line of one whose
// handler panicked, besides the access log.
func TestRequestIDInEveryLogLine(t *testing.T) {
	t.Parallel()
	log, logs := observed(zapcore.DebugLevel)
	// No events feed: GET /v1/events fails with 503 and logs why.
	c := client{t: t, h: httpapi.New(nil, httpapi.Options{Log: log, AccessLog: true,
		Ready: func(context.Context) error { panic("readiness exploded") }})}
	requireError(t, c.doHeaders("GET", "/v1/events", "", map[string]string{"X-Request-Id": "req-events"}),
		http.StatusServiceUnavailable, "unavailable")
	requireError(t, c.doHeaders("GET", "/readyz", "", map[string]string{"X-Request-Id": "req-panic"}),
		http.StatusInternalServerError, "internal")
	for _, id := range []string{"req-events", "req-panic"} {
		n := 0
		for _, e := range logs.All() {
			if e.ContextMap()["request_id"] == id {
				n++
			}
		}
		if n < 2 {
			t.Errorf("%d lines carry request_id %s, want the failure's and the access log's", n, id)
		}
	}
	for _, e := range logs.All() {
		if _, ok := e.ContextMap()["request_id"]; !ok {
			t.Errorf("a line without request_id: %q %v", e.Message, e.ContextMap())
		}
	}
}

// With ACCESS_LOG off (the default) a request writes no line; on, exactly
// one: method, route, status, duration, client and request id.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	quietLog, quiet := observed(zapcore.DebugLevel)
	off := client{t: t, h: httpapi.New(s.Svc, httpapi.Options{Log: quietLog})}
	env := off.createN(300, 3, 3600)
	off.grab(env.EnvelopeID, "u-1")
	off.do("GET", "/nope", "")
	if n := quiet.FilterMessage("request").Len(); n != 0 {
		t.Errorf("%d access log lines with the access log off", n)
	}

	shopKey := makeKey(t, s, "shop", everyScope())
	log, logs := observed(zapcore.InfoLevel)
	api := newKeysAPI(t, s, time.Hour, httpapi.Options{Log: log, AccessLog: true})
	c := client{t: t, h: api, token: shopKey}
	for _, r := range []struct {
		method, path, body, id string
		route                  string
		status                 int
		client                 string
	}{
		{"POST", grabPath(env.EnvelopeID), `{"user_id":"u-2"}`, "r1", "POST /v1/envelopes/{id}/grab", 200, "shop"},
		{"POST", grabPath(env.EnvelopeID), `{"user_id":"u-2"}`, "r2", "POST /v1/envelopes/{id}/grab", 200, "shop"},
		{"GET", "/v1/envelopes/by-code/" + env.ShareCode, "", "r3", "GET /v1/envelopes/by-code/{share_code}", 200, "shop"},
		{"HEAD", "/v1/envelopes/by-code/" + env.ShareCode, "", "r3h", "GET /v1/envelopes/by-code/{share_code}", 200, "shop"},
		{"GET", statusPath(env.EnvelopeID + 1_000_000), "", "r4", "GET /v1/envelopes/{id}", 404, "shop"},
		{"GET", "/v1/nope", "", "r5", "GET /", 404, "shop"},
		{"DELETE", "/v1/envelopes", "", "r6", "DELETE /v1/envelopes", 405, "shop"},
		{"GET", "/healthz", "", "r7", "GET /healthz", 200, ""}, // no key asked, none taken
	} {
		a := c.doHeaders(r.method, r.path, r.body, map[string]string{"X-Request-Id": r.id})
		if a.Status != r.status {
			t.Fatalf("%s %s: %s, want %d", r.method, r.path, a, r.status)
		}
		lines := logs.FilterMessage("request").FilterField(zap.String("request_id", r.id)).All()
		if len(lines) != 1 {
			t.Fatalf("%s %s: %d access log lines, want 1", r.method, r.path, len(lines))
		}
		f := lines[0].ContextMap()
		d, _ := f["duration"].(time.Duration)
		if f["method"] != r.method || f["route"] != r.route || f["status"] != int64(r.status) || f["client"] != r.client || d <= 0 {
			t.Errorf("%s %s: access log %v; want route %q, status %d, client %q and a duration", r.method, r.path, f,
				r.route, r.status, r.client)
		}
	}
	// Refused before any route: no client, no route.
	c.token = ""
	c.doHeaders("POST", grabPath(env.EnvelopeID), `{"user_id":"u-3"}`, map[string]string{"X-Request-Id": "r8"})
	lines := logs.FilterField(zap.String("request_id", "r8")).All()
	if len(lines) != 1 || lines[0].ContextMap()["route"] != telemetry.RouteUnrouted || lines[0].ContextMap()["client"] != "" ||
		lines[0].ContextMap()["status"] != int64(401) {
		t.Errorf("a request without a key: %d lines, %v", len(lines), lines)
	}
	if n := logs.FilterMessage("request").Len(); n != 9 {
		t.Errorf("%d access log lines for 9 requests", n)
	}
}

// With METRICS_ADDR the API does not serve /metrics; the metrics listener's
// handler serves them and nothing else.
func TestMetricsElsewhere(t *testing.T) {
	t.Parallel()
	api := client{t: t, h: httpapi.New(nil, httpapi.Options{NoMetrics: true})}
	requireError(t, api.do("GET", "/metrics", ""), http.StatusNotFound, "not_found")
	if a := api.do("GET", "/healthz", ""); a.Status != http.StatusOK {
		t.Errorf("GET /healthz: %s", a)
	}
	m := client{t: t, h: httpapi.NewMetrics(telemetry.Grabber.Handler(), nil)}
	a := m.do("GET", "/metrics", "")
	if a.Status != http.StatusOK || !strings.Contains(string(a.Body), "redpacket_grabs_total") {
		t.Errorf("GET /metrics on the metrics listener: %d, %.200s", a.Status, a.Body)
	}
	for _, p := range []string{"/healthz", "/v1/envelopes/1", "/"} {
		requireError(t, m.do("GET", p, ""), http.StatusNotFound, "not_found")
	}
	a = m.do("POST", "/metrics", "")
	requireError(t, a, http.StatusMethodNotAllowed, "method_not_allowed")
}
