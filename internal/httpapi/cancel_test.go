package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"redpacket/internal/httpapi"
	"redpacket/internal/telemetry"
	"redpacket/internal/testenv/stack"
)

// holdPipeline is a Redis hook that, once armed, stops the next pipeline
// before it is sent, runs hold, and only then sends it.
type holdPipeline struct {
	armed atomic.Bool
	hold  func()
}

func (h *holdPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *holdPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *holdPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.armed.CompareAndSwap(true, false) {
			h.hold()
		}
		return next(ctx, cmds)
	}
}

// A client that hangs up while its grab is under way is no server error: no
// error-level log line, counted as canceled rather than unavailable; the
// grab it sent still stands, and the client's retry is answered with it.
// Not parallel: it reads the process's grab counters.
func TestGrabClientGone(t *testing.T) {
	s := stack.New(t)
	defer s.Redis.Coalesce(1, 64)() // as the grabber runs: one worker keeps the pipelines in order
	core, logs := observer.New(zapcore.DebugLevel)
	c := client{t: t, h: httpapi.New(s.Svc, httpapi.Options{Log: zap.New(core)})}
	env := c.createN(300, 3, 3600)
	c.grab(env.EnvelopeID, "warm-up") // takes a segment of order numbers: the next grab's only round trip is its script

	canceled, unavailable := grabCount("canceled"), grabCount("unavailable")
	ctx, hangUp := context.WithCancel(context.Background())
	answered := make(chan struct{})
	hook := &holdPipeline{hold: func() {
		// The grab is queued and about to be sent: the client hangs up
		// (net/http ends the request's context) and the handler returns
		// before Redis has answered.
		hangUp()
		select {
		case <-answered:
		case <-time.After(10 * time.Second):
			t.Error("the handler did not return after the client hung up")
		}
	}}
	s.RDB.AddHook(hook)
	hook.armed.Store(true)
	req := httptest.NewRequest("POST", grabPath(env.EnvelopeID), strings.NewReader(`{"user_id":"gone"}`)).WithContext(ctx)
	rec := httptest.NewRecorder()
	go func() {
		defer close(answered)
		c.h.ServeHTTP(rec, req)
	}()
	select {
	case <-answered:
	case <-time.After(15 * time.Second):
		t.Fatal("the grab was not answered")
	}

	if rec.Code != 499 {
		t.Errorf("a hang-up recorded as %d, want 499 (not a 5xx the server-error alert counts)", rec.Code)
	}
	if got := grabCount("canceled") - canceled; got != 1 {
		t.Errorf("redpacket_grabs_total{result=canceled} rose by %v, want 1", got)
	}
	if got := grabCount("unavailable") - unavailable; got != 0 {
		t.Errorf("redpacket_grabs_total{result=unavailable} rose by %v, want 0", got)
	}
	for _, e := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
		t.Errorf("error-level log line for a client that went away: %s %v", e.Message, e.ContextMap())
	}
	if n := logs.FilterMessage("client went away before the answer").Len(); n != 1 {
		t.Errorf("%d debug lines for the hang-up, want 1", n)
	}
	// The grab was sent: the retry finds it.
	again := c.grab(env.EnvelopeID, "gone")
	if !again.Repeat {
		t.Errorf("retry after hanging up: %+v, want the repeat of the grab sent before", again)
	}
	if st := c.status(env.EnvelopeID); st.GrabbedCount != 2 || st.RemainingCount != 1 {
		t.Errorf("after the hang-up and its retry: grabbed %d, remaining %d; want 2, 1", st.GrabbedCount, st.RemainingCount)
	}
	if a := c.grabAnswer(env.EnvelopeID, "late"); a.Status != http.StatusOK {
		t.Errorf("next grab: %s", a)
	}
}

func grabCount(result string) float64 {
	return testutil.ToFloat64(telemetry.Grabs.WithLabelValues(result))
}
