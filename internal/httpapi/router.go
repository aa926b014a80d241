package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/reqctx"
	"redpacket/internal/telemetry"
)

// router routes requests by path and method and answers everything else in
// the API's error shape: 404, 405 with an Allow header, 400 for a query
// string that does not parse, 500 for a panic. Both daemons' servers use it.
type router struct {
	mux *http.ServeMux
	log *zap.Logger
	// unavailable logs the answers 503 (a dependency down, identifiers
	// exhausted): expected while it lasts, so summarised, not one per request.
	unavailable *telemetry.Summary
	// served lists the routes registered ("GET /readyz"), for the test
	// that holds them to the API's contract.
	served []string
	// fast, when set, serves the requests it reports true for before the
	// mux sees them (the grab: fastGrab).
	fast func(http.ResponseWriter, *http.Request) bool
}

// unavailableLogEvery is how often, at most, the answers 503 are logged.
const unavailableLogEvery = 10 * time.Second

func newRouter(log *zap.Logger) *router {
	if log == nil {
		log = zap.NewNop()
	}
	rt := &router{mux: http.NewServeMux(), log: log,
		unavailable: telemetry.NewSummary(log, "requests answered 503", unavailableLogEvery)}
	rt.mux.HandleFunc("/", rt.notFound)
	return rt
}

// NewOps returns the flusher's operations handler: GET /healthz, /readyz
// (ready: the dependencies answer) and /metrics (served by metrics),
// answering as the API does.
func NewOps(ready func(ctx context.Context) error, metrics http.Handler, log *zap.Logger) http.Handler {
	rt := newRouter(log)
	rt.operations(ready, metrics)
	return rt
}

// NewMetrics returns the handler of a listener of the metrics alone
// (the grabber's METRICS_ADDR): GET /metrics, answering anything else as
// the API does.
func NewMetrics(metrics http.Handler, log *zap.Logger) http.Handler {
	rt := newRouter(log)
	rt.route("/metrics", map[string]http.HandlerFunc{"GET": metrics.ServeHTTP})
	return rt
}

// operations routes the probes and, unless metrics is nil (they have a
// listener of their own), the metrics; none needs a token.
func (rt *router) operations(ready func(ctx context.Context) error, metrics http.Handler) {
	if ready == nil {
		ready = func(context.Context) error { return nil }
	}
	healthz, readyz := telemetry.Probes(ready, rt.logOf)
	rt.route("/healthz", map[string]http.HandlerFunc{"GET": healthz})
	rt.route("/readyz", map[string]http.HandlerFunc{"GET": readyz})
	if metrics != nil {
		rt.route("/metrics", map[string]http.HandlerFunc{"GET": metrics.ServeHTTP})
	}
}

// route registers the handlers of a path by method, and a 405 for any other
// method naming the allowed ones.
func (rt *router) route(path string, byMethod map[string]http.HandlerFunc) {
	var allowed []string
	for method, h := range byMethod {
		rt.mux.HandleFunc(method+" "+path, h)
		rt.served = append(rt.served, method+" "+path)
		allowed = append(allowed, method)
		if method == http.MethodGet {
			allowed = append(allowed, http.MethodHead) // ServeMux serves HEAD with the GET handler
		}
	}
	slices.Sort(allowed)
	allow := strings.Join(allowed, ", ")
	rt.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) { rt.methodNotAllowed(w, r, allow) })
}

// logOf is the logger of r: the router's, with the request's id when the
// API gave it one.
func (rt *router) logOf(r *http.Request) *zap.Logger { return reqctx.Logger(r.Context(), rt.log) }

// answerError answers as writeError does, logging with the request's
// logger, so that any line it writes carries the request's id.
func (rt *router) answerError(w http.ResponseWriter, r *http.Request, err error) {
	withLog := *rt
	withLog.log = rt.logOf(r)
	withLog.writeError(w, r, err)
}

func (rt *router) notFound(w http.ResponseWriter, r *http.Request) {
	rt.answerError(w, r, errNoRoute)
}

func (rt *router) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	rt.answerError(w, r, methodNotAllowedErr(r.Method))
}

// ServeHTTP recovers from panics, so a bug in one request answers 500
// instead of killing the server.
func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			rt.logOf(r).Error("panic serving request", zap.String("path", r.URL.Path),
				zap.Any("panic", p), zap.Stack("stack"))
			rt.answerError(w, r, errPanicked)
		}
	}()
	// ServeMux would answer a path that is not clean ("//", "/./", "/../")
	// with a redirect in HTML; every answer here is JSON.
	if !cleanPath(r.URL.Path) {
		rt.notFound(w, r)
		return
	}
	// r.URL.Query() drops the pairs it cannot parse ("after=3%zz",
	// "after=3;") and keeps the rest: a query is read whole or refused.
	if r.URL.RawQuery != "" {
		if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
			rt.answerError(w, r, badRequest("malformed query string: "+err.Error()))
			return
		}
	}
	if rt.fast != nil && rt.fast(w, r) {
		return
	}
	rt.mux.ServeHTTP(w, r)
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
