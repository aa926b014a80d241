package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"redpacket/internal/httpapi"
)

// The answers the router, authentication, the body reader and the events
// route give before any handler's work, exactly as a client sees them:
// status, code, message and the header that comes with them. No stack: each
// is refused before the service is asked.
func TestRefusalAnswers(t *testing.T) {
	t.Parallel()
	api := client{t: t, h: httpapi.New(nil, httpapi.Options{
		Ready: func(context.Context) error { panic("readiness exploded") }})}
	authed := client{t: t, h: httpapi.New(nil, httpapi.Options{Token: testToken})}
	cases := []struct {
		name                string
		c                   client
		method, path, body  string
		status              int
		code, msg           string
		header, headerValue string
	}{
		{"no token", authed, "GET", "/v1/events", "", http.StatusUnauthorized, "unauthenticated",
			"missing or wrong bearer token", "WWW-Authenticate", `Bearer realm="redpacket"`},
		{"no route", api, "GET", "/v1/no-such-route", "", http.StatusNotFound, "not_found", "no such route", "", ""},
		{"no sub-route", api, "GET", "/v1/envelopes/1/nope", "", http.StatusNotFound, "not_found", "no such route", "", ""},
		{"method", api, "DELETE", "/v1/events", "", http.StatusMethodNotAllowed, "method_not_allowed",
			"DELETE is not allowed here", "Allow", "GET, HEAD"},
		{"method of a sub-route", api, "PUT", "/v1/envelopes/1/grab", "", http.StatusMethodNotAllowed, "method_not_allowed",
			"PUT is not allowed here", "Allow", "POST"},
		{"feed not served", api, "GET", "/v1/events", "", http.StatusServiceUnavailable, "unavailable",
			"the events feed is not served here", "", ""},
		{"create body too large", api, "POST", "/v1/envelopes", padded(`"count":1`, maxCreateBody+1), http.StatusBadRequest,
			"invalid_argument", "request body is larger than 262144 bytes", "", ""},
		{"grab body too large", api, "POST", "/v1/envelopes/1/grab", padded(`"user_id":"u-1"`, maxBody+1), http.StatusBadRequest,
			"invalid_argument", "request body is larger than 65536 bytes", "", ""},
		{"panic", api, "GET", "/readyz", "", http.StatusInternalServerError, "internal", "internal error", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := tc.c.do(tc.method, tc.path, tc.body)
			if msg := requireError(t, a, tc.status, tc.code); msg != tc.msg {
				t.Errorf("message %q, want %q", msg, tc.msg)
			}
			if tc.header != "" && a.Header.Get(tc.header) != tc.headerValue {
				t.Errorf("%s: %q, want %q", tc.header, a.Header.Get(tc.header), tc.headerValue)
			}
		})
	}
}
