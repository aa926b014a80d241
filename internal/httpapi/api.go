// Package httpapi is the grabber's HTTP API (see the API document): routes,
// strict JSON, bearer-token auth, and the mapping of errors to answers.
package httpapi

import (
	"context"
	"crypto/subtle"
	"net/http"
	"path"
	"strconv"

	"go.uber.org/zap"

	"redpacket/internal/grab"
	"redpacket/internal/telemetry"
)

// Options configure the API.
type Options struct {
	Token string                          // when set, required as a bearer token on /v1/
	Ready func(ctx context.Context) error // readiness probe (Redis and PostgreSQL); nil: always ready
	Log   *zap.Logger

	// Events serves GET /v1/events; nil answers 503 there.
	Events EventFeed
}

// API serves the grabber's routes.
type API struct {
	svc   *grab.Service
	token string
	ready func(ctx context.Context) error
	log   *zap.Logger
	mux   *http.ServeMux
}

// New returns the grabber's HTTP handler.
func New(svc *grab.Service, o Options) *API {
	a := &API{svc: svc, token: o.Token, ready: o.Ready, log: o.Log, mux: http.NewServeMux()}
	if a.log == nil {
		a.log = zap.NewNop()
	}
	if a.ready == nil {
		a.ready = func(context.Context) error { return nil }
	}
	a.route("/v1/envelopes", map[string]http.HandlerFunc{"POST": a.create})
	a.route("/v1/envelopes/{id}", map[string]http.HandlerFunc{"GET": a.status})
	// /v1/envelopes/{id}/grab and /v1/envelopes/by-code/{code} overlap as
	// patterns (by-code/grab matches both), so one handler tells them apart.
	a.mux.HandleFunc("/v1/envelopes/{id}/{sub}", a.envelopeSub)
	a.route("/v1/users/{user_id}/short-id", map[string]http.HandlerFunc{"POST": a.shortID})
	a.route("/v1/events", map[string]http.HandlerFunc{"GET": a.events(o.Events)})
	healthz, readyz := telemetry.Probes(a.ready, a.log)
	a.route("/healthz", map[string]http.HandlerFunc{"GET": healthz})
	a.route("/readyz", map[string]http.HandlerFunc{"GET": readyz})
	a.route("/metrics", map[string]http.HandlerFunc{"GET": telemetry.MetricsHandler().ServeHTTP})
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
	})
	return a
}

// route registers the handlers of a path by method, and an answer in the
// API's error shape for any other method.
func (a *API) route(path string, byMethod map[string]http.HandlerFunc) {
	for method, h := range byMethod {
		a.mux.HandleFunc(method+" "+path, h)
	}
	a.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		a.writeError(w, r, &apiError{http.StatusMethodNotAllowed, "method_not_allowed", r.Method + " is not allowed here"})
	})
}

func (a *API) envelopeSub(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.PathValue("id") == "by-code" && r.Method == http.MethodGet:
		a.statusByCode(w, r)
	case r.PathValue("id") != "by-code" && r.PathValue("sub") == "grab" && r.Method == http.MethodPost:
		a.grab(w, r)
	case r.PathValue("id") == "by-code" || r.PathValue("sub") == "grab":
		a.writeError(w, r, &apiError{http.StatusMethodNotAllowed, "method_not_allowed", r.Method + " is not allowed here"})
	default:
		a.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
	}
}

// ServeHTTP checks the token on /v1/ and recovers from panics, so a bug in
// one request answers 500 instead of killing the server.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			a.log.Error("panic serving request", zap.String("path", r.URL.Path), zap.Any("panic", p), zap.Stack("stack"))
			a.writeError(w, r, &apiError{http.StatusInternalServerError, "internal", "internal error"})
		}
	}()
	if a.token != "" && len(r.URL.Path) >= 4 && r.URL.Path[:4] == "/v1/" && !a.authorized(r) {
		a.writeError(w, r, &apiError{http.StatusUnauthorized, "unauthenticated", "missing or wrong bearer token"})
		return
	}
	// ServeMux would answer a path that is not clean ("//", "/./", "/../")
	// with a redirect in HTML; the API answers every request in JSON.
	if !cleanPath(r.URL.Path) {
		a.writeError(w, r, &apiError{http.StatusNotFound, "not_found", "no such route"})
		return
	}
	a.mux.ServeHTTP(w, r)
}

// cleanPath reports whether p is a rooted path that path.Clean leaves as it
// is (but for a trailing slash), the paths ServeMux serves without redirecting.
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if p[len(p)-1] == '/' && c != "/" {
		c += "/"
	}
	return c == p
}

func (a *API) authorized(r *http.Request) bool {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(prefix) || h[:len(prefix)] != prefix {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h[len(prefix):]), []byte(a.token)) == 1
}

// pathID reads the {id} path value: a positive integer.
func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("envelope_id: must be a positive integer")
	}
	return id, nil
}
