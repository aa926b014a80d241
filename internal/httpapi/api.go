// Package httpapi is the grabber's HTTP API (see the API document): routes
// with the scope each needs, strict JSON, authentication (none, one bearer
// token, or per-client API keys), request ids and the access log, and the
// mapping of errors to answers; and the flusher's operations handler, which
// answers in the same way.
package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"redpacket/internal/apikey"
	"redpacket/internal/grab"
	"redpacket/internal/reqctx"
	"redpacket/internal/telemetry"
)

// Options configure the API.
type Options struct {
	// Token, when set, is required as a bearer token on /v1/ (GRABBER_AUTH=token).
	Token string
	// Keys, when set, checks the bearer token of every /v1/ request as an
	// API key, and each route's scope (GRABBER_AUTH=keys). Token must be empty.
	Keys Keys
	// AccessLog writes a line per request (ACCESS_LOG=on).
	AccessLog bool
	// NoMetrics leaves /metrics out (404): it has a listener of its own
	// (METRICS_ADDR).
	NoMetrics bool

	Ready func(ctx context.Context) error // readiness probe (Redis and PostgreSQL); nil: always ready
	Log   *zap.Logger

	// Events serves GET /v1/events; nil answers 503 there.
	Events EventFeed
}

// API serves the grabber's routes.
type API struct {
	*router
	svc       *grab.Service
	auth      auth
	accessLog bool
	endpoints []endpoint
	handler   http.Handler // authentication and routing, counted in the HTTP metrics
}

// Endpoint is a route of the API and the scope an API key needs for it.
type Endpoint struct {
	Method  string
	Pattern string
	Scope   apikey.Scope // 0 only outside /v1/ (probes, metrics), which take no key
}

type endpoint struct {
	Endpoint
	serve http.HandlerFunc
}

// New returns the grabber's HTTP handler.
func New(svc *grab.Service, o Options) *API {
	a := &API{router: newRouter(o.Log), svc: svc, auth: newAuth(o.Token, o.Keys), accessLog: o.AccessLog}
	// Every /v1/ route names the scope a key needs for it: a route without
	// one is refused here, when the API is built.
	a.handle(
		endpoint{Endpoint{http.MethodPost, "/v1/envelopes", apikey.ScopeCreate}, a.create},
		endpoint{Endpoint{http.MethodGet, "/v1/envelopes/{id}", apikey.ScopeRead}, a.status},
		// A short id is handed out (written) on first ask: not a read.
		endpoint{Endpoint{http.MethodPost, "/v1/users/{user_id}/short-id", apikey.ScopeGrab}, a.shortID},
		endpoint{Endpoint{http.MethodGet, "/v1/events", apikey.ScopeEvents}, a.events(o.Events)},
		endpoint{Endpoint{http.MethodGet, "/v1/users/{user_id}/claims", apikey.ScopeRead}, a.userClaims},
		endpoint{Endpoint{http.MethodGet, "/v1/senders/{sender_id}/envelopes", apikey.ScopeRead}, a.senderEnvelopes},
	)
	// /v1/envelopes/{id}/grab and /v1/envelopes/by-code/{share_code} overlap as
	// patterns (by-code/grab matches both), so one handler tells them apart.
	grabH := a.scoped(endpoint{Endpoint{http.MethodPost, "/v1/envelopes/{id}/grab", apikey.ScopeGrab}, a.grab})
	byCode := a.scoped(endpoint{Endpoint{http.MethodGet, "/v1/envelopes/by-code/{share_code}", apikey.ScopeRead}, a.statusByCode})
	posts := map[string]http.HandlerFunc{
		"grab": grabH,
		// Closing is the sender's, as creating is.
		"close": a.scoped(endpoint{Endpoint{http.MethodPost, "/v1/envelopes/{id}/close", apikey.ScopeCreate}, a.closeEnvelope}),
	}
	reads := map[string]http.HandlerFunc{
		"claims": a.scoped(endpoint{Endpoint{http.MethodGet, "/v1/envelopes/{id}/claims", apikey.ScopeRead}, a.envelopeClaims}),
		"split":  a.scoped(endpoint{Endpoint{http.MethodGet, "/v1/envelopes/{id}/split", apikey.ScopeRead}, a.split}),
	}
	a.mux.HandleFunc("/v1/envelopes/{id}/{sub}", a.envelopeSub(byCode, posts, reads))
	metrics := telemetry.Grabber.Handler()
	if o.NoMetrics {
		metrics = nil
	}
	a.operations(o.Ready, metrics)
	a.fast = a.fastGrab
	a.handler = telemetry.InstrumentHTTP(http.HandlerFunc(a.serveAuthenticated))
	return a
}

// Endpoints lists the API's /v1/ routes with their scopes.
func (a *API) Endpoints() []Endpoint {
	out := make([]Endpoint, len(a.endpoints))
	for i, ep := range a.endpoints {
		out[i] = ep.Endpoint
	}
	return out
}

// handle registers endpoints, those of one path together (for the Allow
// header of a 405).
func (a *API) handle(eps ...endpoint) {
	var paths []string
	byPath := map[string]map[string]http.HandlerFunc{}
	for _, ep := range eps {
		if byPath[ep.Pattern] == nil {
			paths = append(paths, ep.Pattern)
			byPath[ep.Pattern] = map[string]http.HandlerFunc{}
		}
		byPath[ep.Pattern][ep.Method] = a.scoped(ep)
	}
	for _, p := range paths {
		a.route(p, byPath[p])
	}
}

// scoped records ep and returns its handler behind the check of its scope.
func (a *API) scoped(ep endpoint) http.HandlerFunc {
	if ep.Scope == 0 {
		panic("httpapi: route " + ep.Method + " " + ep.Pattern + " names no scope")
	}
	a.endpoints = append(a.endpoints, ep)
	route := ep.Method + " " + ep.Pattern
	return func(w http.ResponseWriter, r *http.Request) {
		if a.permitted(w, r, route, ep.Scope) {
			ep.serve(w, r)
		}
	}
}

// permitted records the route serving r and reports whether the request's
// key holds scope; if not, it has answered 403.
func (a *API) permitted(w http.ResponseWriter, r *http.Request, route string, scope apikey.Scope) bool {
	info := reqctx.From(r.Context())
	if info != nil {
		info.Route = route
	}
	if err := a.auth.permit(info, scope); err != nil {
		w.Header().Set("WWW-Authenticate", insufficientScopeChallenge(scope))
		a.writeError(w, r, err)
		return false
	}
	return true
}

func (a *API) envelopeSub(byCode http.HandlerFunc, posts, reads map[string]http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		byCodePath := r.PathValue("id") == "by-code"
		sub := r.PathValue("sub")
		post, isPost := posts[sub]
		read, isRead := reads[sub]
		isGet := r.Method == http.MethodGet || r.Method == http.MethodHead // as ServeMux serves GET routes
		switch {
		case byCodePath && isGet:
			byCode(w, r)
		case byCodePath:
			a.methodNotAllowed(w, r, "GET, HEAD")
		case isRead && isGet:
			read(w, r)
		case isRead:
			a.methodNotAllowed(w, r, "GET, HEAD")
		case isPost && r.Method == http.MethodPost:
			post(w, r)
		case isPost:
			a.methodNotAllowed(w, r, "POST")
		default:
			a.notFound(w, r)
		}
	}
}

// ServeHTTP gives the request its id and context, then authenticates and
// routes it; with the access log on, it writes the request's line.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info := reqctx.New(requestID(r.Header.Get(requestIDHeader)), a.log)
	w.Header().Set(requestIDHeader, info.ID)
	r = r.WithContext(reqctx.With(r.Context(), info))
	if !a.accessLog {
		a.handler.ServeHTTP(w, r)
		return
	}
	a.serveLogged(w, r, info)
}

// writeError answers as the router does, logging with the request's logger,
// so that its line carries the request's id.
func (a *API) writeError(w http.ResponseWriter, r *http.Request, err error) {
	a.answerError(w, r, err)
}

// pathID reads the {id} path value. An id has one spelling: a positive
// decimal integer without sign or leading zero, so "+1001" and "01001" are
// refused rather than read as 1001.
func pathID(r *http.Request) (int64, error) {
	return parseID(r.PathValue("id"))
}

// parseID reads an envelope id as pathID does. The error is made only when
// the id is refused: a grab would otherwise pay for it every time.
func parseID(s string) (int64, error) {
	if s == "" || s[0] < '1' || s[0] > '9' {
		return 0, badEnvelopeID()
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, badEnvelopeID()
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, badEnvelopeID()
	}
	return id, nil
}

func badEnvelopeID() error {
	return badRequest("envelope_id: must be a positive integer, without sign or leading zero")
}
