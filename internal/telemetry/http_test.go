package telemetry

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// A mux like the grabber's: method patterns, a pattern shared by two
// methods, a catch-all.
func testMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /t/envelopes", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	mux.HandleFunc("/t/envelopes/{id}/{sub}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("sub") == "boom" {
			http.Error(w, "boom", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok")) // implicit 200
	})
	mux.HandleFunc("/t/", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) })
	return mux
}

func TestInstrumentHTTPCountsByRouteAndClass(t *testing.T) {
	t.Parallel()
	h := InstrumentHTTP(testMux())
	auth := InstrumentHTTP(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(401) // answered before any mux: no pattern
	}))
	count := func(route, code string) float64 {
		var m dto.Metric
		if err := httpRequests.WithLabelValues(route, code).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	before := map[[2]string]float64{}
	cases := []struct{ route, code string }{
		{"POST /t/envelopes", "2xx"}, {"POST /t/envelopes/{id}/{sub}", "2xx"}, {"GET /t/envelopes/{id}/{sub}", "2xx"},
		{"GET /t/envelopes/{id}/{sub}", "5xx"}, {"GET /t/", "4xx"}, {"OTHER /t/", "4xx"}, {RouteUnrouted, "4xx"},
	}
	for _, c := range cases {
		before[[2]string{c.route, c.code}] = count(c.route, c.code)
	}
	do := func(h http.Handler, method, path string) {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, path, nil))
	}
	do(h, "POST", "/t/envelopes")
	do(h, "POST", "/t/envelopes/17/grab")
	do(h, "POST", "/t/envelopes/18/grab")
	do(h, "GET", "/t/envelopes/by-code/123")
	do(h, "GET", "/t/envelopes/1/boom")
	do(h, "GET", "/t/nothing/here")
	do(h, "BREW", "/t/pot")
	do(auth, "POST", "/t/envelopes/1/grab")
	want := map[[2]string]float64{
		{"POST /t/envelopes", "2xx"}: 1, {"POST /t/envelopes/{id}/{sub}", "2xx"}: 2, {"GET /t/envelopes/{id}/{sub}", "2xx"}: 1,
		{"GET /t/envelopes/{id}/{sub}", "5xx"}: 1, {"GET /t/", "4xx"}: 1, {"OTHER /t/", "4xx"}: 1, {RouteUnrouted, "4xx"}: 1,
	}
	for k, n := range want {
		if got := count(k[0], k[1]) - before[k]; got != n {
			t.Errorf("redpacket_http_requests_total{route=%q,code=%q} rose by %v, want %v", k[0], k[1], got, n)
		}
	}
	// A route's other classes exist at zero from its first request.
	if got := count("POST /t/envelopes", "5xx") - before[[2]string{"POST /t/envelopes", "5xx"}]; got != 0 {
		t.Errorf("5xx of POST /t/envelopes: %v", got)
	}
	r := prometheus.NewRegistry()
	r.MustRegister(httpSeconds)
	mfs, err := r.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("gather the duration histogram: %v, %d families", err, len(mfs))
	}
	if n := len(mfs[0].GetMetric()); n < 6 {
		t.Errorf("duration histogram has %d routes, want at least 6", n)
	}
}

// The wrapper keeps what long polls need: flushing through it, and
// http.ResponseController reaching the connection.
func TestInstrumentHTTPKeepsFlusher(t *testing.T) {
	t.Parallel()
	h := InstrumentHTTP(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("a"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush through the wrapper: %v", err)
		}
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if !rec.Flushed {
		t.Error("the recorder was not flushed")
	}
}

// BenchmarkInstrumentHTTP: the grab route of a mux like the grabber's, bare
// and instrumented, and the middleware alone around a handler that does
// nothing (its whole cost per request).
func BenchmarkInstrumentHTTP(b *testing.B) {
	mux := testMux()
	nothing := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"mux", mux}, {"mux-instrumented", InstrumentHTTP(mux)}, {"nothing", nothing}, {"nothing-instrumented", InstrumentHTTP(nothing)}} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest("POST", "/t/envelopes/17/grab", nil)
			w := discard{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				c.h.ServeHTTP(&w, req)
			}
		})
	}
}

type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// Requests with methods of their own (net/http takes any token) share one
// cached route: the cache does not grow with what clients send.
func TestRouteCacheBoundedByMethod(t *testing.T) {
	count := func() (n int) {
		routes.Range(func(any, any) bool { n++; return true })
		return n
	}
	routeMetricsFor("GET", "/bounded-test")
	before := count()
	for i := range 1000 {
		routeMetricsFor(fmt.Sprintf("M%d", i), "/bounded-test")
	}
	if after := count(); after > before+1 {
		t.Errorf("the route cache grew from %d to %d entries for 1000 unusual methods", before, after)
	}
}
