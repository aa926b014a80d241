package e2e_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"redpacket/internal/testenv"
)

// Both daemons' servers answer every error in the API's JSON shape, with
// Allow on a 405, and hold at most their cap of connections open: one more
// waits until one closes.
func TestServersErrorsAndConnectionCap(t *testing.T) {
	t.Parallel()
	dbURL := testenv.PostgresURL(t)
	_, prefix := testenv.Redis(t)
	grabberAddr, flusherAddr := freeAddr(t), freeAddr(t)
	env := append(settingsOff, "DATABASE_URL="+dbURL, "REDIS_URL="+testenv.RedisURL(t), "REDIS_KEY_PREFIX="+prefix,
		"GRABBER_ADDR="+grabberAddr, "FLUSHER_ADDR="+flusherAddr, "GRABBER_MAX_CONNS=2", "FLUSHER_MAX_CONNS=2")
	flusher := start(t, "flusher", env)
	waitReady(t, "http://"+flusherAddr+"/readyz")
	grabber := start(t, "grabber", env)
	waitReady(t, "http://"+grabberAddr+"/readyz")

	for _, c := range []struct {
		addr, method, path string
		status             int
		code, allow        string
	}{
		{flusherAddr, "GET", "/nope", 404, "not_found", ""},
		{flusherAddr, "GET", "/", 404, "not_found", ""},
		{flusherAddr, "POST", "/healthz", 405, "method_not_allowed", "GET, HEAD"},
		{flusherAddr, "DELETE", "/metrics", 405, "method_not_allowed", "GET, HEAD"},
		{flusherAddr, "GET", "/healthz?x=%zz", 400, "invalid_argument", ""},
		{grabberAddr, "POST", "/healthz", 405, "method_not_allowed", "GET, HEAD"},
		{grabberAddr, "GET", "/v1/envelopes", 405, "method_not_allowed", "POST"},
	} {
		req, _ := http.NewRequest(c.method, "http://"+c.addr+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if resp.StatusCode != c.status || json.Unmarshal(body, &e) != nil || e.Error.Code != c.code ||
			resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s%s: %d %s %q (Allow %q), want %d %s, Allow %q", c.method, c.addr, c.path, resp.StatusCode,
				resp.Header.Get("Content-Type"), body, resp.Header.Get("Allow"), c.status, c.code, c.allow)
		}
	}
	http.DefaultClient.CloseIdleConnections()

	for _, addr := range []string{grabberAddr, flusherAddr} {
		requireConnectionCap(t, addr, 2)
	}
	grabber.stop(t)
	flusher.stop(t)
}

// requireConnectionCap holds max kept-alive connections to addr, checks that
// one more is not served, then closes one and checks that it is.
func requireConnectionCap(t *testing.T, addr string, max int) {
	t.Helper()
	probe := func(c net.Conn, r *bufio.Reader, wait time.Duration) error {
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range max {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if err := probe(c, bufio.NewReader(c), 5*time.Second); err != nil {
			t.Fatalf("%s: a connection within the cap of %d: %v", addr, max, err)
		}
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	r := bufio.NewReader(extra)
	if err := probe(extra, r, 500*time.Millisecond); err == nil {
		t.Fatalf("%s: connection %d was served past a cap of %d", addr, max+1, max)
	} else if !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("%s: connection %d: %v, want it kept waiting", addr, max+1, err)
	}
	held[0].Close()
	_ = extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(r, nil) // the request sent above
	if err != nil {
		t.Fatalf("%s: the waiting connection was not served once one closed: %v", addr, err)
	}
	resp.Body.Close()
}
