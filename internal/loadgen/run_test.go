package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAPI is an in-memory grabber whose bug can be chosen, to show that the
// load tool notices each kind of broken promise.
type fakeAPI struct {
	bug string // "", "double_pay", "repeat_other", "fail_half"

	mu      sync.Mutex
	nextEnv int64
	nextPkt int64
	grabs   int
	grants  int
	envs    map[int64]*fakeEnv
}

type fakeEnv struct {
	pool   []Grant
	claims map[string]Grant
}

func (f *fakeAPI) handler() http.Handler {
	f.envs = map[int64]*fakeEnv{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/envelopes", f.create)
	mux.HandleFunc("POST /v1/envelopes/{id}/grab", f.grab)
	return mux
}

func (f *fakeAPI) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextEnv++
	e := &fakeEnv{claims: map[string]Grant{}}
	for i := range req.Count {
		amount := req.TotalCents / int64(req.Count)
		if i == req.Count-1 {
			amount = req.TotalCents - amount*int64(req.Count-1)
		}
		f.nextPkt++
		e.pool = append(e.pool, Grant{PacketID: f.nextPkt, AmountCents: amount, OrderNo: fmt.Sprint("o", f.nextPkt)})
	}
	f.envs[f.nextEnv] = e
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"envelope_id":%d,"total_cents":%d,"count":%d,"status":"open"}`, f.nextEnv, req.TotalCents, req.Count)
}

func (f *fakeAPI) grab(w http.ResponseWriter, r *http.Request) {
	var req struct {
		UserID string `json:"user_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	var id int64
	if _, err := fmt.Sscan(r.PathValue("id"), &id); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grabs++
	e := f.envs[id]
	if f.bug == "fail_half" && f.grabs%2 == 0 {
		w.WriteHeader(500)
		fmt.Fprint(w, `{"error":{"code":"internal","message":"x"}}`)
		return
	}
	if g, ok := e.claims[req.UserID]; ok {
		if f.bug == "repeat_other" {
			g.PacketID += 1000
		}
		writeGrant(w, id, g, true)
		return
	}
	if len(e.pool) == 0 {
		w.WriteHeader(409)
		fmt.Fprint(w, `{"error":{"code":"sold_out","message":"x"}}`)
		return
	}
	g := e.pool[len(e.pool)-1]
	f.grants++
	if f.bug != "double_pay" || f.grants != 5 { // the 5th grant leaves its packet in the pool
		e.pool = e.pool[:len(e.pool)-1]
	}
	e.claims[req.UserID] = g
	writeGrant(w, id, g, false)
}

func writeGrant(w http.ResponseWriter, env int64, g Grant, repeat bool) {
	fmt.Fprintf(w, `{"envelope_id":%d,"packet_id":%d,"amount_cents":%d,"order_no":%q,"grabbed_at":"2026-11-21T10:00:01.123Z","repeat":%v}`,
		env, g.PacketID, g.AmountCents, g.OrderNo, repeat)
}

func testConfig(url string) Config {
	return Config{
		URL: url, Envelopes: 2, Packets: 50, TotalCents: 5000, Expires: time.Hour, Users: 4,
		Repeat: 0.3, Grabs: 400, Duration: 10 * time.Second, Timeout: 5 * time.Second,
		FlushTimeout: time.Second, PGPoll: 50 * time.Millisecond, MaxErrors: 0.01, JSON: true,
	}
}

func runAgainst(t *testing.T, h http.Handler, c Config) (int, Result, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	if c.URL == "" {
		c.URL = srv.URL
	}
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), c, &stdout, &stderr)
	var r Result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("stdout is not one JSON result: %v\n%s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	return code, r, stderr.String()
}

func TestLoadgenRunHonestServer(t *testing.T) {
	code, r, stderr := runAgainst(t, (&fakeAPI{}).handler(), testConfig(""))
	if code != 0 || !r.OK || r.Violations != 0 {
		t.Fatalf("exit %d, ok %v, violations %q, failures %q; stderr %s", code, r.OK, r.Texts, r.Failures, stderr)
	}
	if !r.AllSoldOut || r.StopReason != stopSoldOut || r.Granted != 100 {
		t.Errorf("sold out %v, stopped by %s, granted %d; want sold out, 100 granted", r.AllSoldOut, r.StopReason, r.Granted)
	}
	for _, e := range r.Envelopes {
		if e.Granted != 50 || e.GrantedCents != 5000 || !e.SoldOut {
			t.Errorf("envelope %+v: want 50 packets, 5000 cents, sold out", e)
		}
	}
	if r.RepeatGrabs == 0 || r.StatusCounts["200"] != r.Granted+r.RepeatGrabs {
		t.Errorf("repeats %d, 200s %d, granted %d", r.RepeatGrabs, r.StatusCounts["200"], r.Granted)
	}
	if r.Latency.Count != int(r.Grabs) || r.Latency.P50 <= 0 || r.Latency.P99 < r.Latency.P50 {
		t.Errorf("latency %+v for %d grabs", r.Latency, r.Grabs)
	}
}

func TestLoadgenRunFailsOnBrokenPromises(t *testing.T) {
	tests := []struct {
		bug, want string
	}{
		{"double_pay", "answered to two users"},
		{"repeat_other", "answered two packets"},
	}
	for _, tt := range tests {
		t.Run(tt.bug, func(t *testing.T) {
			code, r, stderr := runAgainst(t, (&fakeAPI{bug: tt.bug}).handler(), testConfig(""))
			if code != 1 || r.OK || r.Violations == 0 {
				t.Fatalf("exit %d, ok %v, %d violations; want exit 1 and violations", code, r.OK, r.Violations)
			}
			if !strings.Contains(strings.Join(r.Texts, "\n"), tt.want) || !strings.Contains(stderr, tt.want) {
				t.Errorf("violations %q, stderr %q; want one saying %q", r.Texts, stderr, tt.want)
			}
		})
	}
}

func TestLoadgenRunFailsOnTooManyErrors(t *testing.T) {
	code, r, _ := runAgainst(t, (&fakeAPI{bug: "fail_half"}).handler(), testConfig(""))
	if code != 1 || r.Violations != 0 || len(r.Failures) != 1 || r.Errors == 0 || r.StatusCounts["500"] != r.Errors {
		t.Fatalf("exit %d, violations %q, failures %q, errors %d, statuses %v", code, r.Texts, r.Failures, r.Errors, r.StatusCounts)
	}
	c := testConfig("")
	c.MaxErrors = 1
	if code, r, _ := runAgainst(t, (&fakeAPI{bug: "fail_half"}).handler(), c); code != 0 {
		t.Fatalf("-max-errors 1: exit %d, failures %q", code, r.Failures)
	}
}

func TestLoadgenRunNoopReference(t *testing.T) {
	c := testConfig("")
	c.Noop, c.Grabs = true, 300
	code, r, stderr := runAgainst(t, NoopHandler(), c)
	if code != 0 || r.Checked || r.Grabs != 300 || r.StatusCounts["200"] != 300 || r.StopReason != stopGrabs {
		t.Fatalf("exit %d, checked %v, grabs %d, statuses %v, stopped by %s; stderr %s",
			code, r.Checked, r.Grabs, r.StatusCounts, r.StopReason, stderr)
	}
}

// A duration alone runs for the duration, however many grabs that makes.
func TestLoadgenRunStopsAtDuration(t *testing.T) {
	c := testConfig("")
	c.Noop, c.Grabs, c.Duration = true, 0, 1500*time.Millisecond
	start := time.Now()
	code, r, _ := runAgainst(t, NoopHandler(), c)
	if took := time.Since(start); code != 0 || r.StopReason != stopDuration || took < c.Duration || took > 10*time.Second {
		t.Fatalf("exit %d, stopped by %s after %s (%d grabs); want the duration, %s", code, r.StopReason, took, r.Grabs, c.Duration)
	}
	if r.ElapsedS < 1.5 || len(r.Timeline) != 1 && len(r.Timeline) != 2 {
		t.Errorf("elapsed %.2fs, %d seconds in the timeline; want 1.5s in 1 or 2", r.ElapsedS, len(r.Timeline))
	}
}

func TestLoadgenRunCannotCreate(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(401) })
	srv := httptest.NewServer(h)
	defer srv.Close()
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), testConfig(srv.URL), &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "401") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestLoadgenParseFlags(t *testing.T) {
	env := func(k string) string {
		if k == "GRABBER_API_TOKEN" {
			return "tok"
		}
		return ""
	}
	var errs bytes.Buffer
	c, err := ParseFlags([]string{"-users", "8", "-repeat", "0.2", "-duration", "3s"}, env, &errs)
	if err != nil || c.Token != "tok" || c.Users != 8 || c.Repeat != 0.2 || c.Duration != 3*time.Second || c.Grabs != 0 {
		t.Fatalf("ParseFlags = %+v, %v; want -duration alone to set no grab limit", c, err)
	}
	// Neither bound: 10 s. -grabs alone: no time limit.
	if c, err := ParseFlags(nil, env, &errs); err != nil || c.Duration != 10*time.Second || c.Grabs != 0 {
		t.Errorf("no bound given: duration %s, grabs %d, %v; want 10s and no grab limit", c.Duration, c.Grabs, err)
	}
	if c, err := ParseFlags([]string{"-grabs", "500"}, env, &errs); err != nil || c.Duration != 0 || c.Grabs != 500 {
		t.Errorf("-grabs 500 alone: duration %s, grabs %d, %v; want no time limit", c.Duration, c.Grabs, err)
	}
	for _, bad := range [][]string{
		{"-repeat", "1"}, {"-users", "0"}, {"-total-cents", "5", "-packets", "10"},
		{"-noop", "-database-url", "postgres://x"}, {"-expires", "1500ms"}, {"extra"},
	} {
		if _, err := ParseFlags(bad, env, &errs); err == nil {
			t.Errorf("ParseFlags(%q) accepted", bad)
		}
	}
}
