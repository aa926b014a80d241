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

	"redpacket/internal/envelope"
	"redpacket/internal/httpapi"
	"redpacket/internal/testenv/stack"
)

// BenchmarkHTTPGrab measures grabs over HTTP (net/http server and client in
// one process, keep-alive, 64 concurrent clients) on one hot envelope with
// the grabber's coalescing: the HTTP layer's share of a grab's cost.
func BenchmarkHTTPGrab(b *testing.B) {
	s := stack.New(b)
	defer s.Redis.Coalesce(4, 64)()
	srv := httptest.NewServer(httpapi.New(s.Svc, httpapi.Options{}))
	defer srv.Close()
	e, err := s.Svc.Create(context.Background(), envelope.CreateRequest{SenderID: "bench", TotalCents: 10_000_000, Count: 100_000})
	if err != nil {
		b.Fatal(err)
	}
	if b.N > 100_000 {
		b.Fatalf("at most 100000 grabs (-benchtime=100000x), asked %d", b.N)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	url := fmt.Sprintf("%s/v1/envelopes/%d/grab", srv.URL, e.ID)
	var user atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := `{"user_id":"u` + strconv.FormatInt(user.Add(1), 10) + `"}`
			resp, err := client.Post(url, "application/json", strings.NewReader(body))
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
