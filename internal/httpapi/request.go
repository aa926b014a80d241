package httpapi

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"time"

	"go.uber.org/zap"

	"redpacket/internal/reqctx"
	"redpacket/internal/telemetry"
)

// requestIDHeader names the request's id, in the request and the answer.
const requestIDHeader = "X-Request-Id"

// maxRequestIDLen is the longest id taken from a client.
const maxRequestIDLen = 128

// requestID is the client's id when it is 1 to 128 visible ASCII characters
// (no space, nothing a log or a header could be confused by), else a new one.
func requestID(client string) string {
	if validRequestID(client) {
		return client
	}
	return newRequestID()
}

func validRequestID(s string) bool {
	if len(s) < 1 || len(s) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}

// newRequestID returns 128 random bits in hex. The bits come from the
// runtime's per-thread generator (math/rand/v2, ChaCha8 seeded by the
// system): an id needs to be unique, not secret, and this costs a few
// nanoseconds where crypto/rand costs a system call's worth (BENCHMARKS.md).
func newRequestID() string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
	var out [32]byte
	hex.Encode(out[:], b[:])
	return string(out[:])
}

// serveLogged serves r and writes its access log line: method, route,
// status, duration, client and request id.
func (a *API) serveLogged(w http.ResponseWriter, r *http.Request, info *reqctx.Info) {
	start := time.Now()
	sw := &statusRecorder{ResponseWriter: w}
	a.handler.ServeHTTP(sw, r)
	route := info.Route
	if route == "" {
		route = telemetry.RouteName(r.Method, r.Pattern)
	}
	status := sw.status
	if status == 0 {
		status = http.StatusOK // the handler wrote nothing: net/http answers 200
	}
	a.log.Info("request", zap.String("method", r.Method), zap.String("route", route), zap.Int("status", status),
		zap.Duration("duration", time.Since(start)), zap.String("client", info.Client),
		zap.String("request_id", info.ID))
}

// statusRecorder remembers the status a handler answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 || w.status < 200 { // the final status follows any 1xx
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (deadlines of
// long polls).
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush keeps the http.Flusher of the writer it wraps.
func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
