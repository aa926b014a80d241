package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"redpacket/internal/httpapi"
	"redpacket/internal/testenv/stack"
)

func TestMetricsCountGrabsWithoutToken(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	c := client{t: t, h: httpapi.New(s.Svc, httpapi.Options{Token: testToken}), token: testToken}
	env := c.createN(300, 3, 60)
	for _, u := range []string{"m-1", "m-1", "m-2", "m-3", "m-4"} {
		c.grabAnswer(env.EnvelopeID, u)
	}
	c.token = ""
	a := c.do("GET", "/metrics", "")
	if a.Status != http.StatusOK {
		t.Fatalf("GET /metrics without a token: %s", a)
	}
	body := string(a.Body)
	for _, want := range []string{
		`redpacket_grabs_total{result="granted"}`, `redpacket_grabs_total{result="repeat"}`,
		`redpacket_grabs_total{result="sold_out"}`, "redpacket_grab_duration_seconds_bucket",
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if a := c.do("POST", "/metrics", ""); a.Status != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %s, want 405", a)
	}
}
