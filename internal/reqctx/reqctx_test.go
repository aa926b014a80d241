package reqctx

import (
	"context"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestClientNameAndLogger(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	base := zap.New(core)
	if name, ok := ClientName(context.Background()); ok || name != "" {
		t.Errorf("outside a request: %q %v", name, ok)
	}
	if Logger(context.Background(), base) != base {
		t.Error("outside a request the fallback is not the logger")
	}
	info := New("req-1", base)
	ctx := With(context.Background(), info)
	if _, ok := ClientName(ctx); ok {
		t.Error("a client before authentication")
	}
	info.Client = "shop"
	if name, ok := ClientName(ctx); !ok || name != "shop" {
		t.Errorf("ClientName = %q %v, want shop", name, ok)
	}
	Logger(ctx, zap.NewNop()).Info("one")
	Logger(ctx, zap.NewNop()).Warn("two")
	for _, e := range logs.All() {
		if f := e.ContextMap(); f["request_id"] != "req-1" || f["client"] != "shop" {
			t.Errorf("line %q: %v, want request_id req-1 and client shop", e.Message, f)
		}
	}
	if logs.Len() != 2 {
		t.Errorf("%d lines, want 2", logs.Len())
	}
}
