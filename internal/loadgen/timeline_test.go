package loadgen

import (
	"math"
	"slices"
	"testing"
	"time"
)

// The timeline's seconds add up to the run: every answer is in one second,
// with the latencies of that second, and a short last second is folded
// into the one before.
func TestBuildTimeline(t *testing.T) {
	t.Parallel()
	d := &driver{}
	w1, w2 := &worker{d: d, st: newWorkerStats(0)}, &worker{d: d, st: newWorkerStats(0)}
	answer := func(w *worker, at, lat time.Duration, failed bool) {
		s := w.tl.second(at, len(w.st.lat))
		if failed {
			w.tl.add(s, 1, 0)
			return
		}
		w.st.lat = append(w.st.lat, lat)
		w.tl.add(s, 0, 1)
	}
	for i := range 10 { // second 0: 10 answers of 1..10 ms
		answer(w1, time.Duration(i)*50*time.Millisecond, time.Duration(i+1)*time.Millisecond, false)
	}
	answer(w2, 1200*time.Millisecond, 100*time.Millisecond, false) // second 1
	answer(w2, 1300*time.Millisecond, 0, true)                     // an error
	answer(w1, 2100*time.Millisecond, 7*time.Millisecond, false)   // the short last second
	tl := buildTimeline([]*worker{w1, w2}, 2200*time.Millisecond)
	if len(tl) != 2 {
		t.Fatalf("%d seconds, want 2 (the last 0.2 s folded in): %+v", len(tl), tl)
	}
	if s := tl[0]; s.Grabs != 10 || s.Granted != 10 || s.Errors != 0 || s.P50US != 5000 || s.MaxUS != 10000 || s.DurS != 1 {
		t.Errorf("second 0: %+v", s)
	}
	if s := tl[1]; s.Grabs != 3 || s.Errors != 1 || s.Granted != 2 || s.MaxUS != 100000 || math.Abs(s.DurS-1.2) > 1e-9 {
		t.Errorf("second 1 (with the last 0.2 s): %+v", s)
	}

	started := time.Unix(1000, 0)
	addFlushLag(tl, started, []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 90 * time.Millisecond},
		[]time.Time{started.Add(100 * time.Millisecond), started.Add(300 * time.Millisecond), started.Add(5 * time.Second)})
	if tl[0].FlushClaims != 2 || tl[0].FlushMaxMS != 40 || tl[1].FlushClaims != 1 || tl[1].FlushP50MS != 90 {
		t.Errorf("flush lag by second: %+v", tl)
	}
}

func TestHistogramCountsEveryAnswer(t *testing.T) {
	t.Parallel()
	var lat []time.Duration
	for i := 1; i <= 1000; i++ {
		lat = append(lat, time.Duration(i*i)*time.Microsecond/10)
	}
	slices.Sort(lat)
	h := histogram(lat)
	total := 0
	for i, b := range h {
		total += b.Count
		if i > 0 && b.LeUS <= h[i-1].LeUS {
			t.Fatalf("bounds not increasing at %d: %+v", i, h)
		}
	}
	if total != len(lat) || h[len(h)-1].LeUS < us(lat[len(lat)-1]) || h[0].LeUS < us(lat[0]) {
		t.Errorf("%d buckets hold %d of %d answers, from %v to %v µs", len(h), total, len(lat), h[0].LeUS, h[len(h)-1].LeUS)
	}
	if histogram(nil) != nil {
		t.Error("a histogram of nothing is not empty")
	}
}
