package telemetry

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTP request metrics, by route pattern, never by path: a path carries ids,
// a pattern does not, so the number of series stays fixed.
var (
	httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "redpacket_http_requests_total",
		Help: "HTTP requests answered, by route pattern and status class (2xx, 3xx, 4xx, 5xx)."},
		[]string{"route", "code"})
	httpSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "redpacket_http_request_duration_seconds",
		Help:    "Time from a request's headers read to its handler's return, by route pattern.",
		Buckets: prometheus.ExponentialBuckets(100e-6, 2, 16)}, []string{"route"})
)

// RouteUnrouted labels requests answered before a route was chosen (a
// missing token, a path that is not clean).
const RouteUnrouted = "unrouted"

var codeClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// InstrumentHTTP counts and times the requests next serves. next must route
// with an http.ServeMux that sees the same *http.Request (as the grabber's
// API does): the route is the pattern the mux matched, read after next
// returns. A pattern without a method ("/v1/envelopes/{id}/{sub}") is
// prefixed with the request's method, so routes that share a pattern but
// not a method stay apart; an unusual method is counted as OTHER.
func InstrumentHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		m := routeMetricsFor(r.Method, r.Pattern)
		m.seconds.Observe(time.Since(start).Seconds())
		m.codes[codeClass(sw.status)].Inc()
	})
}

// routeMetrics are one route's series, looked up once per route rather than
// hashed from their labels on every request.
type routeMetrics struct {
	codes   [len(codeClasses)]prometheus.Counter
	seconds prometheus.Observer
}

type routeKey struct{ method, pattern string }

var routes sync.Map // routeKey -> *routeMetrics

// routeMetricsFor keys its cache by the method as the route's name has it
// (an unusual one as OTHER): net/http takes any token for a method, and a
// pattern registered without one matches them all, so keyed by the method
// as sent, anyone could grow the cache without bound.
func routeMetricsFor(method, pattern string) *routeMetrics {
	key := routeKey{metricMethod(method), pattern}
	if m, ok := routes.Load(key); ok {
		return m.(*routeMetrics)
	}
	name := RouteName(method, pattern)
	m := &routeMetrics{seconds: httpSeconds.WithLabelValues(name)}
	// Every class exists from the route's first request, so an error
	// ratio is 0 rather than missing until the first error.
	for i, c := range codeClasses {
		m.codes[i] = httpRequests.WithLabelValues(name, c)
	}
	actual, _ := routes.LoadOrStore(key, m)
	return actual.(*routeMetrics)
}

// RouteName is a request's route as the metrics name it: its pattern with
// the method first ("POST /v1/envelopes/{id}/{sub}"), or RouteUnrouted.
func RouteName(method, pattern string) string {
	switch {
	case pattern == "":
		return RouteUnrouted
	case strings.Contains(pattern, " "): // "POST /v1/envelopes"
		return pattern
	}
	return metricMethod(method) + " " + pattern
}

// metricMethod is the method as the metrics name it: a usual one as it is,
// any other OTHER.
func metricMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return method
	}
	return "OTHER"
}

// codeClass indexes codeClasses; a status outside 100-599 counts as 5xx.
func codeClass(status int) int {
	if status == 0 {
		status = http.StatusOK // the handler wrote nothing: net/http answers 200
	}
	if status < 100 || status > 599 {
		return len(codeClasses) - 1
	}
	return status/100 - 1
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 || w.status < 200 { // the final status follows any 1xx
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines of long polls).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush keeps the http.Flusher of the writer it wraps.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
