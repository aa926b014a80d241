package events_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"redpacket/internal/events"
)

// The receiver's URL may carry credentials and a secret query; neither
// appears in the sender's log, not even in a failed request's error.
func TestWebhookLogsNoSecret(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.openEnvelope(t, 7, 1)
	d.claimPackets(t, 7, 0, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The receiver hangs up on every request without an answer, so every
	// attempt fails with the URL in its error. The port stays this test's:
	// closed instead, another listener could take it and answer.
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	defer func() { _ = ln.Close(); <-accepted }()
	addr := ln.Addr().String()
	const password, token = "hunter2x", "s3cr3tq"
	cfg := fastRetries(fmt.Sprintf("http://user:%s@%s/hook?token=%s", password, addr, token))
	cfg.Keys = [][]byte{[]byte("redact-test-key-0123456789abcdef")}
	core, logs := observer.New(zapcore.DebugLevel)
	w := events.NewWebhook(d.Store, nil, cfg, zap.New(core))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, 10*time.Second, "a failed delivery logged", func() bool {
		return logs.FilterMessage("webhook delivery failed; will retry").Len() >= 2
	})
	cancel()
	<-done
	for _, e := range logs.All() {
		line := e.Message + " " + fmt.Sprint(e.ContextMap())
		for _, s := range []string{password, token} {
			if strings.Contains(line, s) {
				t.Errorf("log line holds %q: %s", s, line)
			}
		}
	}
}
