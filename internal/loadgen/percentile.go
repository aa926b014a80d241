package loadgen

import (
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest sample such that at least p % of the
// samples are less than or equal to it. It never interpolates, so the answer
// is always a latency that was actually measured. Empty input gives 0.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// rank = ceil(p/100 * n), computed in integers where possible so that
	// p = 50, n = 10 gives exactly 5, not 5.000000001 rounded up to 6.
	rank := int(p * float64(n) / 100)
	if float64(rank)*100 < p*float64(n) {
		rank++
	}
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Summary is the distribution of a set of durations.
type Summary struct {
	Count int
	Min   time.Duration
	Mean  time.Duration
	P50   time.Duration
	P95   time.Duration
	P99   time.Duration
	Max   time.Duration
}

// Summarize sorts samples in place and summarizes them.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	slices.Sort(samples)
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	return Summary{
		Count: len(samples),
		Min:   samples[0],
		Mean:  sum / time.Duration(len(samples)),
		P50:   Percentile(samples, 50),
		P95:   Percentile(samples, 95),
		P99:   Percentile(samples, 99),
		Max:   samples[len(samples)-1],
	}
}
