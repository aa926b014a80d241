package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"redpacket/internal/apikey"
	"redpacket/internal/envelope"
	"redpacket/internal/httpapi"
	"redpacket/internal/loadgen"
	"redpacket/internal/testenv"
	"redpacket/internal/testenv/stack"
)

// BenchmarkHTTPGrab measures grabs over HTTP (net/http server and client in
// one process, keep-alive, 64 concurrent clients) on one hot envelope with
// the grabber's coalescing: the HTTP layer's share of a grab's cost. Bodies
// are {"user_id":"u<n>"}, the shape the grab path reads without the decoder.
func BenchmarkHTTPGrab(b *testing.B) {
	benchGrab(b, func(n int64) string { return `{"user_id":"u` + strconv.FormatInt(n, 10) + `"}` })
}

// BenchmarkHTTPGrabDecoder is BenchmarkHTTPGrab with bodies that take the
// strict JSON decoder ({"user_id": "u<n>"}, with a space, as many JSON
// encoders write it).
func BenchmarkHTTPGrabDecoder(b *testing.B) {
	benchGrab(b, func(n int64) string { return `{"user_id": "u` + strconv.FormatInt(n, 10) + `"}` })
}

// BenchmarkHTTPNoop is the same-run reference of the two above: the same
// server, client and requests, answered by loadgen's no-op handler, which
// reads the body and writes a fixed grab answer.
func BenchmarkHTTPNoop(b *testing.B) {
	srv := httptest.NewServer(loadgen.NoopHandler())
	defer srv.Close()
	benchPost(b, srv.URL+"/v1/envelopes/1001/grab", "",
		func(n int64) string { return `{"user_id":"u` + strconv.FormatInt(n, 10) + `"}` })
}

// BenchmarkHTTPGrabAuth is BenchmarkHTTPGrab in each authentication mode
// (GRABBER_AUTH), in the same run: none, the one token, and an API key of
// a keyring holding 100 active keys.
func BenchmarkHTTPGrabAuth(b *testing.B) {
	body := func(n int64) string { return `{"user_id":"u` + strconv.FormatInt(n, 10) + `"}` }
	for _, mode := range []string{"none", "token", "keys"} {
		b.Run(mode, func(b *testing.B) {
			s := stack.New(b)
			var o httpapi.Options
			var token string
			switch mode {
			case "token":
				o.Token, token = testToken, testToken
			case "keys":
				token = benchKeyring(b, s, &o)
			}
			benchGrabWith(b, s, o, token, body)
		})
	}
}

// benchKeyring makes 100 API keys, sets o.Keys to a keyring holding them and
// returns one of them.
func benchKeyring(b *testing.B, s *stack.Stack, o *httpapi.Options) string {
	var key string
	for i := range 100 {
		k, err := apikey.Create(context.Background(), s.Pool, fmt.Sprintf("client-%d", i), "",
			apikey.Scopes(apikey.ScopeGrab)|apikey.Scopes(apikey.ScopeRead))
		if err != nil {
			b.Fatal(err)
		}
		key = k
	}
	kr, err := apikey.Open(context.Background(), s.Pool, apikey.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = kr.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-kr.Done() })
	o.Keys = kr
	return key
}

// BenchmarkAPIAuth measures the API's own work around a handler in each
// authentication mode, in process without HTTP: request id, context,
// authentication, the route's scope, routing, and an error answer (the
// envelope id is refused), so that the modes' difference is not lost in the
// noise of a network round trip.
func BenchmarkAPIAuth(b *testing.B) {
	for _, mode := range []string{"none", "token", "keys"} {
		b.Run(mode, func(b *testing.B) {
			var o httpapi.Options
			var token string
			switch mode {
			case "token":
				o.Token, token = testToken, testToken
			case "keys":
				token = benchKeyring(b, &stack.Stack{Pool: mustPool(b)}, &o)
			}
			api := httpapi.New(nil, o)
			req := httptest.NewRequest("GET", "/v1/envelopes/x", nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				api.ServeHTTP(w, req)
				if w.Code != http.StatusBadRequest {
					b.Fatalf("answer %d, want 400", w.Code)
				}
			}
		})
	}
}

func mustPool(b *testing.B) *pgxpool.Pool {
	pool, _ := testenv.Postgres(b)
	return pool
}

func benchGrab(b *testing.B, body func(n int64) string) {
	benchGrabWith(b, stack.New(b), httpapi.Options{}, "", body)
}

// benchGrabWith grabs over HTTP from the API over s built with o, sending
// token as the bearer token when it is not empty.
func benchGrabWith(b *testing.B, s *stack.Stack, o httpapi.Options, token string, body func(n int64) string) {
	defer s.Redis.Coalesce(4, 64)()
	srv := httptest.NewServer(httpapi.New(s.Svc, o))
	defer srv.Close()
	e, err := s.Svc.Create(context.Background(), envelope.CreateRequest{SenderID: "bench", TotalCents: 10_000_000, Count: 100_000})
	if err != nil {
		b.Fatal(err)
	}
	if b.N > 100_000 {
		b.Fatalf("at most 100000 grabs (-benchtime=100000x), asked %d", b.N)
	}
	benchPost(b, fmt.Sprintf("%s/v1/envelopes/%d/grab", srv.URL, e.ID), token, body)
}

// benchPost posts body(n) to url b.N times from 64 concurrent clients
// (n counting up from 1), with token as the bearer token unless empty, and
// requires 200 to each.
func benchPost(b *testing.B, url, token string, body func(n int64) string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	defer client.CloseIdleConnections()
	var user atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body(user.Add(1))))
			if err != nil {
				b.Error(err)
				return
			}
			req.Header.Set("Content-Type", "application/json")
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("grab: %d", resp.StatusCode)
				return
			}
		}
	})
}
