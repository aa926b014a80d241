package loadgen

import (
	"math"
	"slices"
	"time"
)

// Second is one second of a load, for the report's charts over time: what
// was answered in it (by the time the answer arrived), its latency
// percentiles, and the flush lag of the claims granted in it. The last
// second is longer (up to 1.5 s) rather than a short one whose rate would be
// noise.
type Second struct {
	AtS     float64 `json:"t_s"` // start, from the first grab sent
	DurS    float64 `json:"dur_s"`
	Grabs   int64   `json:"grabs"`
	Granted int64   `json:"granted"`
	Errors  int64   `json:"errors"`
	P50US   float64 `json:"p50_us"`
	P95US   float64 `json:"p95_us"`
	P99US   float64 `json:"p99_us"`
	MaxUS   float64 `json:"max_us"`
	// With -database-url: claims granted in this second and found in
	// PostgreSQL, and their lag from answer to commit.
	FlushClaims int     `json:"flush_claims,omitempty"`
	FlushP50MS  float64 `json:"flush_p50_ms,omitempty"`
	FlushP99MS  float64 `json:"flush_p99_ms,omitempty"`
	FlushMaxMS  float64 `json:"flush_max_ms,omitempty"`
}

// Bucket is one bar of the latency histogram: answers with a latency in
// (the previous bucket's LeUS, LeUS].
type Bucket struct {
	LeUS  float64 `json:"le_us"`
	Count int     `json:"count"`
}

// workerTimeline is one user's share of the timeline, kept without locks:
// where each second's latencies start in the user's samples, and its counts.
type workerTimeline struct {
	starts []int // starts[s]: index in workerStats.lat of second s's first sample
	counts []secondCounts
}

type secondCounts struct{ grabs, errors, granted int64 }

// second returns the second an answer at offset belongs to, marking where
// the seconds up to it start in the samples (n of them so far).
func (t *workerTimeline) second(offset time.Duration, n int) int {
	s := max(int(offset/time.Second), 0)
	for len(t.starts) <= s {
		t.starts = append(t.starts, n)
		t.counts = append(t.counts, secondCounts{})
	}
	return s
}

func (t *workerTimeline) add(s int, errors, granted int64) {
	c := &t.counts[s]
	c.grabs++
	c.errors += errors
	c.granted += granted
}

// buildTimeline merges the users' seconds over a load that lasted elapsed.
func buildTimeline(workers []*worker, elapsed time.Duration) []Second {
	n := int(math.Ceil(elapsed.Seconds()))
	if n > 1 && elapsed-time.Duration(n-1)*time.Second < time.Second/2 {
		n-- // fold a short last second into the one before
	}
	out := make([]Second, 0, n)
	var lat []time.Duration
	for s := range n {
		sec := Second{AtS: float64(s), DurS: 1}
		last := s == n-1
		if last {
			sec.DurS = elapsed.Seconds() - float64(s)
		}
		lat = lat[:0]
		for _, w := range workers {
			from, to := w.tl.span(s, last, len(w.st.lat))
			lat = append(lat, w.st.lat[from:to]...)
			for i := s; i < len(w.tl.counts) && (i == s || last); i++ {
				c := w.tl.counts[i]
				sec.Grabs, sec.Errors, sec.Granted = sec.Grabs+c.grabs, sec.Errors+c.errors, sec.Granted+c.granted
			}
		}
		if len(lat) > 0 {
			sum := Summarize(lat)
			sec.P50US, sec.P95US, sec.P99US, sec.MaxUS = us(sum.P50), us(sum.P95), us(sum.P99), us(sum.Max)
		}
		out = append(out, sec)
	}
	return out
}

// span is where second s's samples are in a user's samples (n of them);
// the last second takes everything after its start.
func (t *workerTimeline) span(s int, last bool, n int) (from, to int) {
	if s >= len(t.starts) {
		return n, n
	}
	from, to = t.starts[s], n
	if !last && s+1 < len(t.starts) {
		to = t.starts[s+1]
	}
	return from, to
}

// addFlushLag puts each claim's flush lag on the second its grant was
// answered in.
func addFlushLag(tl []Second, started time.Time, lags []time.Duration, answered []time.Time) {
	if len(tl) == 0 {
		return
	}
	bySecond := make([][]time.Duration, len(tl))
	for i, lag := range lags {
		s := min(max(int(answered[i].Sub(started)/time.Second), 0), len(tl)-1)
		bySecond[s] = append(bySecond[s], lag)
	}
	for s, l := range bySecond {
		if len(l) == 0 {
			continue
		}
		sum := Summarize(l)
		tl[s].FlushClaims, tl[s].FlushP50MS, tl[s].FlushP99MS, tl[s].FlushMaxMS = sum.Count, ms(sum.P50), ms(sum.P99), ms(sum.Max)
	}
}

// histogram buckets sorted latencies in quarter octaves (each bound 2^0.25
// times the one before) from the fastest answer to the slowest.
func histogram(sorted []time.Duration) []Bucket {
	if len(sorted) == 0 {
		return nil
	}
	step := math.Pow(2, 0.25)
	lo := math.Max(us(sorted[0]), 1)
	bound := math.Pow(step, math.Floor(math.Log(lo)/math.Log(step)))
	var out []Bucket
	i := 0
	for i < len(sorted) {
		bound *= step
		j, _ := slices.BinarySearchFunc(sorted[i:], bound, func(d time.Duration, b float64) int {
			if us(d) <= b {
				return -1
			}
			return 1
		})
		out = append(out, Bucket{LeUS: math.Round(bound*10) / 10, Count: j})
		i += j
	}
	return out
}
