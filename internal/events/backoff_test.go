package events

import (
	"testing"
	"time"
)

// The pause after the n-th failure in a row doubles from MinBackoff up to
// MaxBackoff, drawn from the upper half of that, and never overflows.
func TestRetryIn(t *testing.T) {
	t.Parallel()
	w := NewWebhook(nil, nil, WebhookConfig{URL: "http://x", MinBackoff: time.Second, MaxBackoff: 8 * time.Second}, nil)
	for failures, limit := range map[int]time.Duration{
		1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 8 * time.Second,
		64: 8 * time.Second, 1 << 30: 8 * time.Second,
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := w.retryIn(failures)
			if d < limit/2 || d > limit {
				t.Fatalf("retryIn(%d) = %s, want within [%s, %s]", failures, d, limit/2, limit)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("retryIn(%d) took only %d values in 200 draws: no jitter", failures, len(seen))
		}
	}
	// Defaults: 1s doubling to 5m.
	w = NewWebhook(nil, nil, WebhookConfig{URL: "http://x"}, nil)
	if d := w.retryIn(100); d < 150*time.Second || d > 5*time.Minute {
		t.Errorf("default retryIn(100) = %s", d)
	}
}
