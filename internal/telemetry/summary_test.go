package telemetry

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A thousand occurrences in a burst make two lines, not a thousand: the
// first at once, then one that counts the rest; a later occurrence after a
// quiet interval is logged at once again.
func TestSummaryLogsABurstAsTwoLines(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.InfoLevel)
	s := NewSummary(zap.New(core), "requests answered 503", 100*time.Millisecond)
	for i := range 1000 {
		s.Add(zap.Int("i", i))
	}
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d lines during the burst, want 1", n)
	}
	waitFor(t, func() bool { return logs.Len() == 2 })
	second := logs.All()[1].ContextMap()
	if second["count"] != int64(999) || second["i"] != int64(999) {
		t.Fatalf("summary line %v, want count 999 and the last occurrence's fields", second)
	}
	time.Sleep(300 * time.Millisecond) // an interval with nothing ends the quiet
	s.Add(zap.Int("i", -1))
	if n := logs.Len(); n != 3 {
		t.Fatalf("%d lines after a quiet interval and one more, want 3", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
