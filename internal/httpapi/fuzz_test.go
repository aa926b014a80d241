package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// statusOfCode is the HTTP status each error code comes with.
var statusOfCode = map[string]int{
	"invalid_argument":   http.StatusBadRequest,
	"unauthenticated":    http.StatusUnauthorized,
	"not_found":          http.StatusNotFound,
	"method_not_allowed": http.StatusMethodNotAllowed,
	"sold_out":           http.StatusConflict,
	"expired":            http.StatusConflict,
	"unavailable":        http.StatusServiceUnavailable,
	"internal":           http.StatusInternalServerError,
}

// fuzzMaxCount bounds the packets of an envelope a fuzz input may create, so
// every execution stays fast (a create writes one row per packet).
const fuzzMaxCount = 1000

// FuzzAPI sends arbitrary requests to the handler over a real stack and
// checks what any client may rely on: no 5xx (Redis and PostgreSQL are up), no
// panic, the error shape with a documented code on every non-2xx answer, and
// JSON on every 2xx answer.
func FuzzAPI(f *testing.F) {
	_, c := newClient(f)
	// Enough packets that grabs do not run out, and a week before expiry
	// (the stack's clock does not move by itself).
	env := c.createN(10_000_000, 100_000, 604800)
	small := c.createN(1, 1, 604800)
	c.grab(small.EnvelopeID, "holder")

	for _, s := range fuzzSeeds(env.EnvelopeID, small.EnvelopeID) {
		f.Add(s.method, s.path, []byte(s.body))
	}

	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		if !strings.HasPrefix(path, "/") || bigCreate(body) {
			return
		}
		req, err := http.NewRequest(method, "http://grabber.test"+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, req)
		a := answer{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
		checkContract(t, c.h, req, string(body), rec.Result(), a.Body)
		checkFuzzAnswer(t, method, path, body, a)
	})
}

// fuzzSeed is one request of the seed corpus.
type fuzzSeed struct{ method, path, body string }

// fuzzSeeds: well-formed and malformed requests to every route, on the
// roomy envelope env and on small, whose one packet "holder" has.
func fuzzSeeds(env, small int64) []fuzzSeed {
	grab, status := grabPath(env), statusPath(env)
	return []fuzzSeed{
		{"POST", "/v1/envelopes", `{"sender_id":"u-1","total_cents":10000,"count":100,"expires_in_seconds":86400}`},
		{"POST", "/v1/envelopes", `{"sender_id":"u-1","total_cents":5,"count":5}`},
		{"POST", "/v1/envelopes", `{"sender_id":"u-1","total_cents":100,"count":"10"}`},
		{"POST", "/v1/envelopes", `{"sender_id":"u 1","total_cents":0,"count":0,"expires_in_seconds":604801}`},
		{"POST", "/v1/envelopes", `{"sender_id":"u-1","total_cents":100,"count":1,"extra":true}`},
		{"POST", "/v1/envelopes", `{"sender_id":"u-1","total_cents":100,"count":1}{}`},
		{"POST", "/v1/envelopes", `{"sender_id":"u-1","total_cents":100,"count":1}}`},
		{"POST", "/v1/envelopes", `[]`},
		{"POST", "/v1/envelopes", `null`},
		{"POST", "/v1/envelopes", `"x"`},
		{"POST", "/v1/envelopes", ``},
		{"POST", "/v1/envelopes", `{"sender_id":`},
		{"POST", grab, `{"user_id":"fuzz-1"}`},
		{"POST", grab, `{"user_id":""}`},
		{"POST", grab, `{"user_id":"a b"}`},
		{"POST", grab, `{"user_id":5}`},
		{"POST", grab, `{"user_id":"u"} x`},
		{"POST", grabPath(small), `{"user_id":"holder"}`},
		{"POST", grabPath(small), `{"user_id":"late"}`},
		{"POST", "/v1/envelopes/999999999/grab", `{"user_id":"u-1"}`},
		{"POST", "/v1/envelopes/abc/grab", `{"user_id":"u-1"}`},
		{"GET", status, ``},
		{"GET", statusPath(small), ``},
		{"GET", "/v1/envelopes/0", ``},
		{"GET", "/v1/envelopes/-1", ``},
		{"GET", "/v1/envelopes/99999999999999999999", ``},
		{"GET", "/v1/envelopes/%31", ``},
		{"HEAD", status, ``},
		{"DELETE", "/v1/envelopes/1", ``},
		{"PUT", "/v1/envelopes", `{}`},
		{"GET", "/healthz", ``},
		{"GET", "/readyz", ``},
		{"POST", "/healthz", `{}`},
		{"GET", "/nope", ``},
		{"GET", "/", ``},
		{"GET", "/v1//envelopes", ``},
		{"POST", "/v1/envelopes/../envelopes", `{"sender_id":"u-1","total_cents":5,"count":5}`},
		{"GET", status + "/", ``},
		{"", "/healthz", ``},
		{"get", "/healthz", ``},
	}
}

// checkFuzzAnswer checks what any client may rely on in the answer a to
// method path body: no 5xx, JSON, and on a non-2xx answer the error shape
// with a documented code matching the status.
func checkFuzzAnswer(t *testing.T, method, path string, body []byte, a answer) {
	t.Helper()
	if a.Status >= 500 {
		t.Fatalf("%q %q %q: %s", method, path, body, a)
	}
	ct := a.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		t.Fatalf("%q %q %q: Content-Type %q, want application/json (answer %s)", method, path, body, ct, a)
	}
	if a.Status >= 200 && a.Status < 300 {
		if !json.Valid(a.Body) {
			t.Fatalf("%q %q %q: 2xx answer is not JSON: %s", method, path, body, a)
		}
		return
	}
	var e errorBody
	dec := json.NewDecoder(bytes.NewReader(a.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || dec.More() {
		t.Fatalf("%q %q %q: answer is not the error shape (%v): %s", method, path, body, err, a)
	}
	want, documented := statusOfCode[e.Error.Code]
	switch {
	case !documented:
		t.Fatalf("%q %q %q: undocumented error code %q: %s", method, path, body, e.Error.Code, a)
	case want != a.Status:
		t.Fatalf("%q %q %q: code %q with status %d, want %d", method, path, body, e.Error.Code, a.Status, want)
	case e.Error.Message == "":
		t.Fatalf("%q %q %q: empty error message: %s", method, path, body, a)
	case e.Error.Code == "unauthenticated":
		t.Fatalf("%q %q %q: unauthenticated without a token configured: %s", method, path, body, a)
	}
}

// bigCreate reports whether body asks for more than fuzzMaxCount packets
// (under any spelling of "count" the JSON decoder would accept).
func bigCreate(body []byte) bool {
	var m map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(body)).Decode(&m) != nil {
		return false
	}
	for k, v := range m {
		var n json.Number
		// A quoted number is a type error for the handler, not a count.
		if strings.EqualFold(k, "count") && !bytes.HasPrefix(v, []byte(`"`)) && json.Unmarshal(v, &n) == nil {
			if i, err := n.Int64(); err != nil || i > fuzzMaxCount {
				return true
			}
		}
	}
	return false
}

// TestBigCreate checks the fuzz filter itself.
func TestBigCreate(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]bool{
		`{"count":1000}`:                    false,
		`{"count":1001}`:                    true,
		`{"COUNT":50000}`:                   true,
		`{"count":1,"Count":9999}`:          true,
		`{"count":"99999"}`:                 false,
		`{"count":1e9}`:                     true,
		`[]`:                                false,
		`{"count":`:                         false,
		fmt.Sprintf(`{"count":%d}`, 100000): true,
	} {
		if got := bigCreate([]byte(body)); got != want {
			t.Errorf("bigCreate(%s) = %v, want %v", body, got, want)
		}
	}
}
