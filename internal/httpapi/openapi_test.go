package httpapi_test

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"redpacket/internal/apispec"
	"redpacket/internal/httpapi"
	"redpacket/internal/telemetry"
)

// notYetServed are routes the contract (docs/openapi.yaml) describes ahead
// of the code. A route listed here must not be served: once it is, it
// leaves the list, and the test holds it to the contract like the others.
var notYetServed = []string{}

// checkContract fails t when an exchange of a test's client drifts from the
// contract. The flusher's operations handler and the metrics listener serve
// a part of it, without request ids; the grabber's API all of it.
func checkContract(t testing.TB, h http.Handler, req *http.Request, reqBody string, res *http.Response, resBody []byte) {
	t.Helper()
	_, isAPI := h.(*httpapi.API)
	apispec.Require(t).Report(t, apispec.Exchange{Request: req, RequestBody: []byte(reqBody),
		Status: res.StatusCode, Header: res.Header, ResponseBody: resBody, OtherServer: !isAPI})
}

var pathParam = regexp.MustCompile(`\{[^}]*\}`)

// routeKey is a route with its path parameters unnamed, as the router and
// the contract name them differently ({id}, {envelope_id}).
func routeKey(methodAndPath string) string { return pathParam.ReplaceAllString(methodAndPath, "{}") }

// TestContractCoversRoutes: every route the API serves is in the contract
// with the scope the API asks of a key, and every route of the contract is
// served, but those of notYetServed.
func TestContractCoversRoutes(t *testing.T) {
	t.Parallel()
	spec := apispec.Require(t)
	api := httpapi.New(nil, httpapi.Options{})
	served := map[string]bool{}
	for _, r := range httpapi.ServedRoutes(api) {
		served[routeKey(r)] = true
	}
	scopes := map[string]string{}
	for _, ep := range api.Endpoints() {
		scopes[routeKey(ep.Method+" "+ep.Pattern)] = ep.Scope.String()
	}
	inSpec := map[string]bool{}
	for _, op := range spec.Operations() {
		route := op.Method + " " + op.Path
		key := routeKey(route)
		inSpec[key] = true
		pending := slices.Contains(notYetServed, route)
		switch {
		case served[key] && pending:
			t.Errorf("%s is served now: take it out of notYetServed", route)
		case !served[key] && !pending:
			t.Errorf("the contract has %s, the API does not serve it", route)
		}
		var want []string
		if s, ok := scopes[key]; ok {
			want = []string{s}
		}
		if served[key] && !slices.Equal(op.Scopes, want) {
			t.Errorf("%s: the contract asks a key for scopes %q, the API for %q", route, op.Scopes, want)
		}
	}
	for _, r := range notYetServed {
		if !inSpec[routeKey(r)] {
			t.Errorf("notYetServed lists %s, which the contract does not have", r)
		}
	}
	others := []http.Handler{
		httpapi.NewOps(func(context.Context) error { return nil }, telemetry.Flusher.Handler(), nil),
		httpapi.NewMetrics(telemetry.Grabber.Handler(), nil),
	}
	for _, h := range append(others, api) {
		for _, r := range httpapi.ServedRoutes(h) {
			if !inSpec[routeKey(r)] {
				t.Errorf("%s is served (%T), the contract does not have it", r, h)
			}
		}
	}
}

// TestContractAllowsMethods: on every path of the contract, a method it has
// no operation for is answered 405 with the contract's methods in Allow (a
// path none of whose routes is served yet: 404).
func TestContractAllowsMethods(t *testing.T) {
	t.Parallel()
	spec := apispec.Require(t)
	c := client{t: t, h: httpapi.New(nil, httpapi.Options{})}
	byPath := map[string][]string{}
	var order []string
	for _, op := range spec.Operations() {
		if byPath[op.Path] == nil {
			order = append(order, op.Path)
		}
		byPath[op.Path] = append(byPath[op.Path], op.Method+" "+op.Path)
	}
	example := strings.NewReplacer("{envelope_id}", "1001", "{share_code}", "26112148213",
		"{user_id}", "u-42", "{sender_id}", "u-1")
	for _, p := range order {
		a := c.do(http.MethodDelete, example.Replace(p), "")
		pending := true
		for _, r := range byPath[p] {
			pending = pending && slices.Contains(notYetServed, r)
		}
		if pending {
			requireError(t, a, http.StatusNotFound, "not_found")
			continue
		}
		requireError(t, a, http.StatusMethodNotAllowed, "method_not_allowed")
		if got, want := a.Header.Get("Allow"), strings.Join(spec.Allow(p), ", "); got != want {
			t.Errorf("DELETE %s: Allow = %q, the contract has %q", p, got, want)
		}
	}
}
