package limits

import (
	"errors"
	"testing"
	"time"
)

// Grabbers whose clocks differ share one bucket: a grab timed by a clock
// behind the last one's does not set the bucket's time back, so the next
// grab on the clock ahead earns no refill for the time in between. At two
// tokens a second (a bucket of two), a user grabbing through a grabber
// 900 ms behind and one on time gets two grabs within 100 ms, not three.
func TestRateBucketIgnoresAClockBehind(t *testing.T) {
	t.Parallel()
	l, _, _ := newLimiter(t, Config{UserGrabRate: 2})
	ctx := t.Context()
	ahead := time.Date(2030, 5, 17, 12, 0, 0, 0, time.UTC)
	for i, now := range []time.Time{ahead, ahead.Add(-900 * time.Millisecond)} {
		if _, err := l.AdmitGrab(ctx, "", "u", now); err != nil {
			t.Fatalf("grab %d of the full bucket: %v", i, err)
		}
	}
	var rl *RateLimitedError
	if _, err := l.AdmitGrab(ctx, "", "u", ahead.Add(100*time.Millisecond)); !errors.As(err, &rl) {
		t.Errorf("a third grab 100 ms after the first: %v, want rate limited (no refill for the clock behind)", err)
	}
}
