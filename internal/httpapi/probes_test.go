package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"redpacket/internal/httpapi"
)

type probeBody struct {
	Status string `json:"status"`
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	// The probes never reach the service, so none is needed.
	c := client{t: t, h: httpapi.New(nil, httpapi.Options{Token: testToken,
		Ready: func(context.Context) error { return errors.New("not ready") }})}
	a := c.do("GET", "/healthz", "")
	if a.Status != http.StatusOK {
		t.Fatalf("GET /healthz: %s, want 200", a)
	}
	var b probeBody
	requireJSON(t, a, &b)
	if b.Status != "ok" {
		t.Errorf(`/healthz status = %q, want "ok"`, b.Status)
	}
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	t.Run("ready", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int32
		c := client{t: t, h: httpapi.New(nil, httpapi.Options{Token: testToken,
			Ready: func(ctx context.Context) error {
				calls.Add(1)
				if _, ok := ctx.Deadline(); !ok {
					t.Errorf("Ready called without a deadline")
				}
				return nil
			}})}
		a := c.do("GET", "/readyz", "")
		if a.Status != http.StatusOK {
			t.Fatalf("GET /readyz: %s, want 200", a)
		}
		var b probeBody
		requireJSON(t, a, &b)
		if b.Status == "" {
			t.Errorf("/readyz answer has no status: %s", a)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("Ready called %d times, want 1", n)
		}
	})
	t.Run("not ready", func(t *testing.T) {
		t.Parallel()
		c := client{t: t, h: httpapi.New(nil, httpapi.Options{
			Ready: func(context.Context) error { return errors.New("redis down") }})}
		a := c.do("GET", "/readyz", "")
		if a.Status != http.StatusServiceUnavailable {
			t.Fatalf("GET /readyz when not ready: %s, want 503", a)
		}
		var b probeBody
		requireJSON(t, a, &b)
		if b.Status == "" || b.Status == "ready" || b.Status == "ok" {
			t.Errorf("/readyz status = %q when not ready", b.Status)
		}
	})
	t.Run("nil Ready is always ready", func(t *testing.T) {
		t.Parallel()
		c := client{t: t, h: httpapi.New(nil, httpapi.Options{})}
		if a := c.do("GET", "/readyz", ""); a.Status != http.StatusOK {
			t.Fatalf("GET /readyz without a Ready func: %s, want 200", a)
		}
	})
}
