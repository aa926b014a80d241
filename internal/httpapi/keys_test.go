package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"redpacket/internal/apikey"
	"redpacket/internal/httpapi"
	"redpacket/internal/testenv/stack"
)

// newKeysAPI builds the API over s in keys mode, with a keyring that runs
// (refreshing every refresh) until the test ends.
func newKeysAPI(t *testing.T, s *stack.Stack, refresh time.Duration, o httpapi.Options) *httpapi.API {
	t.Helper()
	kr, err := apikey.Open(t.Context(), s.Pool, apikey.Options{RefreshEvery: refresh})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = kr.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-kr.Done() })
	o.Keys = kr
	return httpapi.New(s.Svc, o)
}

// makeKey creates an API key with the given scopes.
func makeKey(t *testing.T, s *stack.Stack, name string, scopes apikey.Scopes) string {
	t.Helper()
	key, err := apikey.Create(t.Context(), s.Pool, name, "", scopes)
	if err != nil {
		t.Fatalf("create key %s: %v", name, err)
	}
	return key
}

// everyScope is the set of all scopes.
func everyScope() apikey.Scopes {
	var all apikey.Scopes
	for _, sc := range apikey.AllScopes {
		all |= apikey.Scopes(sc)
	}
	return all
}

// The route table is the API document's scopes table.
func TestEndpointScopes(t *testing.T) {
	t.Parallel()
	want := map[string]apikey.Scope{
		"POST /v1/envelopes":                     apikey.ScopeCreate,
		"GET /v1/envelopes/{id}":                 apikey.ScopeRead,
		"GET /v1/envelopes/by-code/{share_code}": apikey.ScopeRead,
		"POST /v1/envelopes/{id}/grab":           apikey.ScopeGrab,
		"POST /v1/envelopes/{id}/close":          apikey.ScopeCreate,
		"POST /v1/users/{user_id}/short-id":      apikey.ScopeGrab,
		"GET /v1/events":                         apikey.ScopeEvents,
		"GET /v1/envelopes/{id}/claims":          apikey.ScopeRead,
		"GET /v1/envelopes/{id}/split":           apikey.ScopeRead,
		"GET /v1/users/{user_id}/claims":         apikey.ScopeRead,
		"GET /v1/senders/{sender_id}/envelopes":  apikey.ScopeRead,
	}
	got := map[string]apikey.Scope{}
	for _, ep := range httpapi.New(nil, httpapi.Options{}).Endpoints() {
		got[ep.Method+" "+ep.Pattern] = ep.Scope
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("routes and scopes:\n got %v\nwant %v", got, want)
	}
}

// With keys, every route refuses a key that lacks its scope with 403
// insufficient_scope (before doing anything), and serves a key that holds
// only that scope. Each route of the table is tried, so a route added
// without a sample here fails the test.
func TestScopesOfEveryRoute(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	adminKey := makeKey(t, s, "admin", everyScope())
	only, allBut := map[apikey.Scope]string{}, map[apikey.Scope]string{}
	for _, sc := range apikey.AllScopes {
		only[sc] = makeKey(t, s, "only-"+sc.String(), apikey.Scopes(sc))
		allBut[sc] = makeKey(t, s, "all-but-"+sc.String(), everyScope()&^apikey.Scopes(sc))
	}
	api := newKeysAPI(t, s, time.Hour, httpapi.Options{})
	admin := client{t: t, h: api, token: adminKey}
	env := admin.createN(1000, 10, 3600)
	closing := admin.createN(100, 1, 3600) // closed by the served sample, apart from the grabs'
	samples := scopeSamples(env, closing)
	rows := envelopeRows(t, s)
	for _, ep := range api.Endpoints() {
		route := ep.Method + " " + ep.Pattern
		sample, ok := samples[route]
		if !ok {
			t.Errorf("route %s has no sample request here: add one", route)
			continue
		}
		refused := client{t: t, h: api, token: allBut[ep.Scope]}
		a := refused.do(ep.Method, sample.path, sample.body)
		msg := requireError(t, a, http.StatusForbidden, "insufficient_scope")
		if !strings.Contains(msg, `"`+ep.Scope.String()+`"`) {
			t.Errorf("%s: message %q does not name the scope %s", route, msg, ep.Scope)
		}
		wantChallenge := `Bearer realm="redpacket", error="insufficient_scope", scope="` + ep.Scope.String() + `"`
		if got := a.Header.Values("WWW-Authenticate"); len(got) != 1 || got[0] != wantChallenge {
			t.Errorf("%s: WWW-Authenticate %q, want %q", route, got, wantChallenge)
		}
		if ep.Method == http.MethodGet {
			if a := refused.do(http.MethodHead, sample.path, ""); a.Status != http.StatusForbidden {
				t.Errorf("HEAD %s without its scope: %d, want 403", sample.path, a.Status)
			}
		}
		served := client{t: t, h: api, token: only[ep.Scope]}
		if a := served.do(ep.Method, sample.path, sample.body); a.Status == http.StatusUnauthorized || a.Status == http.StatusForbidden {
			t.Errorf("%s with a key of the scope %s alone: %s", route, ep.Scope, a)
		}
	}
	// The refused create made nothing; the served one made one envelope.
	if n := envelopeRows(t, s); n != rows+1 {
		t.Errorf("%d envelopes after one refused and one served create, want %d", n, rows+1)
	}
	// A refused grab took nothing: the served one took one packet.
	if st := admin.status(env.EnvelopeID); st.GrabbedCount != 1 {
		t.Errorf("grabbed %d after one refused and one served grab, want 1", st.GrabbedCount)
	}
}

// routeSample is a request to one route: its path and body.
type routeSample struct{ path, body string }

// scopeSamples has a request for each route by its method and pattern, on
// the envelope env; closing is the envelope the close sample closes.
func scopeSamples(env, closing createResponse) map[string]routeSample {
	return map[string]routeSample{
		"POST /v1/envelopes":                     {"/v1/envelopes", `{"sender_id":"s-1","total_cents":100,"count":1}`},
		"GET /v1/envelopes/{id}":                 {statusPath(env.EnvelopeID), ""},
		"GET /v1/envelopes/by-code/{share_code}": {"/v1/envelopes/by-code/" + env.ShareCode, ""},
		"POST /v1/envelopes/{id}/grab":           {grabPath(env.EnvelopeID), `{"user_id":"u-1"}`},
		"POST /v1/envelopes/{id}/close":          {fmt.Sprintf("/v1/envelopes/%d/close", closing.EnvelopeID), ""},
		"POST /v1/users/{user_id}/short-id":      {"/v1/users/u-1/short-id", ""},
		"GET /v1/events":                         {"/v1/events", ""},
		"GET /v1/envelopes/{id}/claims":          {fmt.Sprintf("/v1/envelopes/%d/claims", env.EnvelopeID), ""},
		"GET /v1/envelopes/{id}/split":           {fmt.Sprintf("/v1/envelopes/%d/split", env.EnvelopeID), ""},
		"GET /v1/users/{user_id}/claims":         {"/v1/users/u-1/claims", ""},
		"GET /v1/senders/{sender_id}/envelopes":  {"/v1/senders/s-1/envelopes", ""},
	}
}

// With keys, a request without one, with an unknown one (of a key's shape
// or not), a revoked one, or what was the token, is 401 with the challenge;
// an unknown path too, before any route is told. The probes need no key.
func TestKeysUnauthenticated(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	revoked := makeKey(t, s, "revoked", everyScope())
	if err := apikey.Revoke(t.Context(), s.Pool, "revoked"); err != nil {
		t.Fatal(err)
	}
	good := makeKey(t, s, "good", everyScope())
	api := newKeysAPI(t, s, time.Hour, httpapi.Options{})
	unknown := good[:len(good)-8] + "AAAAAAAA"
	other, err := apikey.Create(t.Context(), stack.New(t).Pool, "elsewhere", "", everyScope()) // valid, in another database
	if err != nil {
		t.Fatal(err)
	}
	c := client{t: t, h: api}
	for _, tc := range []struct{ name, auth string }{
		{"missing header", ""},
		{"unknown key", "Bearer " + unknown},
		{"another deployment's key", "Bearer " + other},
		{"revoked key", "Bearer " + revoked},
		{"not a key", "Bearer " + testToken},
		{"key without scheme", good},
		{"basic scheme with the key", "Basic " + good},
		{"key cut short", "Bearer " + good[:len(good)-1]},
	} {
		h := map[string]string{}
		if tc.auth != "" {
			h["Authorization"] = tc.auth
		}
		for _, r := range []struct{ method, path, body string }{
			{"POST", "/v1/envelopes", `{"sender_id":"u-1","total_cents":100,"count":1}`},
			{"POST", "/v1/envelopes/1001/grab", `{"user_id":"u-1"}`},
			{"GET", "/v1/no-such-route", ""},
		} {
			a := c.doHeaders(r.method, r.path, r.body, h)
			requireError(t, a, http.StatusUnauthorized, "unauthenticated")
			want := `Bearer realm="redpacket"`
			if strings.HasPrefix(tc.auth, "Bearer ") {
				want += `, error="invalid_token"`
			}
			if got := a.Header.Values("WWW-Authenticate"); len(got) != 1 || !strings.HasPrefix(got[0], want) {
				t.Errorf("%s: %s %s: WWW-Authenticate %q, want one starting %q", tc.name, r.method, r.path, got, want)
			}
		}
	}
	if n := envelopeRows(t, s); n != 0 {
		t.Errorf("%d envelopes after unauthenticated creates, want 0", n)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if a := c.do("GET", p, ""); a.Status != http.StatusOK {
			t.Errorf("GET %s without a key: %s, want 200", p, a)
		}
	}
	c.token = good
	requireError(t, c.do("GET", "/v1/no-such-route", ""), http.StatusNotFound, "not_found")
	if e := c.createN(100, 1, 60); e.Status != "open" {
		t.Errorf("create with a good key: %+v", e)
	}
}

// A revoked key is refused by every API instance on the database within 5
// seconds, without a restart, while a second key of the client (made before,
// for the rotation) goes on.
func TestRevocationSeenByTwoAPIs(t *testing.T) {
	t.Parallel()
	s := stack.New(t)
	oldKey := makeKey(t, s, "shop-1", everyScope())
	apis := []*httpapi.API{
		newKeysAPI(t, s, time.Second, httpapi.Options{}),
		newKeysAPI(t, s, time.Second, httpapi.Options{}),
	}
	newKey := makeKey(t, s, "shop-2", everyScope())
	status := func(api *httpapi.API, key string) int {
		return client{t: t, h: api, token: key}.do("GET", "/v1/envelopes/999999999", "").Status
	}
	deadline := time.Now().Add(5 * time.Second)
	for i, api := range apis {
		for status(api, newKey) != http.StatusNotFound {
			if time.Now().After(deadline) {
				t.Fatalf("API %d does not take the new key within 5 s", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := status(api, oldKey); got != http.StatusNotFound {
			t.Fatalf("API %d: the old key answers %d before its revocation, want 404 (past auth)", i, got)
		}
	}
	if err := apikey.Revoke(t.Context(), s.Pool, "shop-1"); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()
	for i, api := range apis {
		for status(api, oldKey) != http.StatusUnauthorized {
			if time.Since(revokedAt) > 5*time.Second {
				t.Fatalf("API %d still takes the revoked key 5 s after its revocation", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("API %d refuses the revoked key %s after its revocation", i, time.Since(revokedAt).Round(time.Millisecond))
		if got := status(api, newKey); got != http.StatusNotFound {
			t.Errorf("API %d: the new key answers %d after the old one's revocation, want 404", i, got)
		}
	}
}
