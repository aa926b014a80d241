package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"redpacket/internal/httpapi"
)

// serve runs h within lim on a free loopback port until the test ends and
// returns its address.
func serve(t *testing.T, h http.Handler, lim Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Served on this listener, never closed and bound again: another test
	// could take the port in between, and the dials below reach its server.
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ServeListener(ctx, zaptest.NewLogger(t), NewServer(h, zaptest.NewLogger(t), lim), ln, time.Second)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("server on %s not up: %v", addr, err)
		}
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends a keep-alive GET on c and reads the answer's status line, or
// fails when none comes within wait.
func get(c net.Conn, r *bufio.Reader, wait time.Duration) (string, error) {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Status, nil
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })

// At most MaxConns connections are served at once: one more waits until one
// of them closes, then is served.
func TestServeCapsConnections(t *testing.T) {
	t.Parallel()
	addr := serve(t, ok, Limits{ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute, MaxConns: 2})
	first, second := dial(t, addr), dial(t, addr)
	for _, c := range []net.Conn{first, second} {
		if _, err := get(c, bufio.NewReader(c), 5*time.Second); err != nil {
			t.Fatalf("a connection within the cap: %v", err)
		}
	}
	third := dial(t, addr) // the kernel completes the handshake; the server does not accept it
	r := bufio.NewReader(third)
	if status, err := get(third, r, 300*time.Millisecond); err == nil {
		t.Fatalf("a third connection past a cap of 2 was served: %s", status)
	}
	first.Close()
	_ = third.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(r, nil) // the request sent above
	if err != nil {
		t.Fatalf("the waiting connection was not served once one closed: %v", err)
	}
	resp.Body.Close()
}

// A request whose body drips in is cut off at ReadTimeout, and one whose
// header does at ReadHeaderTimeout.
func TestServerReadTimeouts(t *testing.T) {
	t.Parallel()
	readErr := make(chan error, 1)
	h := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
	})
	addr := serve(t, h, Limits{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 500 * time.Millisecond,
		WriteTimeout: time.Minute, IdleTimeout: time.Minute})

	body := dial(t, addr)
	if _, err := io.WriteString(body, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() { // a byte every 50 ms: 50 s for the whole body
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := body.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	select {
	case err := <-readErr:
		if err == nil {
			t.Error("the dripped body was read whole")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the dripped body was still being read after 10 s")
	}

	header := dial(t, addr)
	if _, err := io.WriteString(header, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil { // never ends
		t.Fatal(err)
	}
	requireClosed(t, header, 10*time.Second)
}

// An answer the client does not take is given up at WriteTimeout, and a
// kept-alive connection left idle is closed at IdleTimeout.
func TestServerWriteAndIdleTimeouts(t *testing.T) {
	t.Parallel()
	writeErr := make(chan error, 1)
	big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 4096 { // 256 MiB: far more than the socket buffers hold
			if _, err := w.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- errors.New("256 MiB written to a client that reads nothing")
	})
	addr := serve(t, big, Limits{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second,
		WriteTimeout: 500 * time.Millisecond, IdleTimeout: 500 * time.Millisecond})

	reader := dial(t, addr)
	if _, err := io.WriteString(reader, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-writeErr:
		if err == nil || strings.Contains(err.Error(), "256 MiB") {
			t.Errorf("writing to a client that reads nothing: %v, want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still writing to a client that reads nothing after 10 s")
	}

	idle := dial(t, addr)
	if _, err := get(idle, bufio.NewReader(idle), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	requireClosed(t, idle, 10*time.Second)
}

// requireClosed waits until the server closes c.
func requireClosed(t *testing.T, c net.Conn, within time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s", within)
	}
}

func TestDefaultLimits(t *testing.T) {
	l := DefaultLimits(7)
	if l.ReadHeaderTimeout <= 0 || l.ReadTimeout <= 0 || l.WriteTimeout <= 0 || l.IdleTimeout <= 0 || l.MaxConns != 7 {
		t.Errorf("DefaultLimits(7) = %+v: every limit must be set", l)
	}
}

// What net/http itself complains of (here a panic it recovered; in
// production an accept failing for want of file descriptors) is logged as a
// warning, seen by an operator who filters out info.
func TestServerLogsItsComplaintsAsWarnings(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	panics := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- ServeListener(ctx, zap.NewNop(), NewServer(panics, zap.New(core), DefaultLimits(0)), ln, time.Second)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	c := dial(t, ln.Addr().String())
	if _, err := get(c, bufio.NewReader(c), 5*time.Second); err == nil {
		t.Fatal("a handler that panicked answered")
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if lines := logs.FilterMessageSnippet("panic serving").All(); len(lines) > 0 {
			if lines[0].Level < zapcore.WarnLevel {
				t.Fatalf("net/http's %q logged at %s, want warn or above", strings.SplitN(lines[0].Message, "\n", 2)[0], lines[0].Level)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("net/http's complaint was not logged: %v", logs.All())
		}
	}
}

// OPTIONS * is answered by the daemon's handler, not by net/http's bare
// 200: as any route the handler does not serve, in the API's JSON error
// shape, on the grabber's API (with a request id, as its every answer), its
// metrics listener and the flusher's operations listener alike.
func TestOptionsStarIsAnsweredByTheHandler(t *testing.T) {
	t.Parallel()
	log := zaptest.NewLogger(t)
	for _, tc := range []struct {
		name      string
		h         http.Handler
		requestID bool
	}{
		{"grabber API", httpapi.New(nil, httpapi.Options{Token: "secret", NoMetrics: true, Log: log}), true},
		{"grabber metrics", httpapi.NewMetrics(http.NotFoundHandler(), log), false},
		{"flusher ops", httpapi.NewOps(nil, http.NotFoundHandler(), log), false},
	} {
		addr := serve(t, tc.h, DefaultLimits(0))
		star := rawRequest(t, addr, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
		unknown := rawRequest(t, addr, "GET /no-such-route HTTP/1.1\r\nHost: x\r\n\r\n")
		var e struct {
			Error struct{ Code, Message string }
		}
		if star.status != unknown.status || star.body != unknown.body || json.Unmarshal([]byte(star.body), &e) != nil ||
			e.Error.Code == "" || (star.requestID != "") != tc.requestID {
			t.Errorf("%s: OPTIONS * answered %s, X-Request-Id %q, %q; want as an unknown route: %s, %q, X-Request-Id set %v",
				tc.name, star.status, star.requestID, star.body, unknown.status, unknown.body, tc.requestID)
		}
		t.Logf("%s: OPTIONS * answers %s, X-Request-Id %q, %s", tc.name, star.status, star.requestID, star.body)
	}
}

type rawAnswer struct{ status, requestID, body string }

// rawRequest sends req as it is on a new connection to addr and reads the
// answer.
func rawRequest(t *testing.T, addr, req string) rawAnswer {
	t.Helper()
	c := dial(t, addr)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawAnswer{resp.Status, resp.Header.Get("X-Request-Id"), string(body)}
}
