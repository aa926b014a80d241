package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"redpacket/internal/httpapi"
	"redpacket/internal/telemetry"
)

// The flusher's operations server answers as the API does: its three
// routes, and every other answer in the API's error shape.
func TestOps(t *testing.T) {
	t.Parallel()
	ready := errors.New("redis down")
	c := client{t: t, h: httpapi.NewOps(func(context.Context) error { return ready }, telemetry.Flusher.Handler(), nil)}
	if a := c.do("GET", "/healthz", ""); a.Status != http.StatusOK {
		t.Errorf("GET /healthz: %s", a)
	}
	if a := c.do("GET", "/readyz", ""); a.Status != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz while not ready: %s", a)
	}
	if a := c.do("GET", "/metrics", ""); a.Status != http.StatusOK || !strings.Contains(string(a.Body), "go_goroutines") {
		t.Errorf("GET /metrics: %d", a.Status)
	}
	for _, p := range []string{"/", "/nope", "/v1/envelopes", "/healthz/", "//healthz", "/x/../readyz"} {
		requireError(t, c.do("GET", p, ""), http.StatusNotFound, "not_found")
	}
	for _, r := range []struct{ method, path string }{{"POST", "/healthz"}, {"PUT", "/readyz"}, {"DELETE", "/metrics"}} {
		a := c.do(r.method, r.path, "")
		requireError(t, a, http.StatusMethodNotAllowed, "method_not_allowed")
		if got := a.Header.Get("Allow"); got != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q, want \"GET, HEAD\"", r.method, r.path, got)
		}
	}
	requireError(t, c.do("GET", "/healthz?x=%zz", ""), http.StatusBadRequest, "invalid_argument")
}
