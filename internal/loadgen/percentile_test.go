package loadgen

import (
	"testing"
	"time"
)

func durations(ns ...int) []time.Duration {
	out := make([]time.Duration, len(ns))
	for i, n := range ns {
		out[i] = time.Duration(n)
	}
	return out
}

func seq(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i + 1)
	}
	return out
}

func TestLoadgenPercentileNearestRank(t *testing.T) {
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample", durations(7), 50, 7},
		{"one sample p99", durations(7), 99, 7},
		{"ten p50 is the 5th", seq(10), 50, 5},
		{"ten p51 is the 6th", seq(10), 51, 6},
		{"ten p95 is the 10th", seq(10), 95, 10},
		{"ten p10 is the 1st", seq(10), 10, 1},
		{"hundred p50", seq(100), 50, 50},
		{"hundred p95", seq(100), 95, 95},
		{"hundred p99", seq(100), 99, 99},
		{"hundred p100", seq(100), 100, 100},
		{"thousand p99.9", seq(1000), 99.9, 999},
		{"two p50 is the lower", durations(3, 9), 50, 3},
		{"tiny p is the minimum", seq(100), 0.001, 1},
		{"repeated values", durations(1, 1, 1, 1, 2), 80, 1},
		{"repeated values p81", durations(1, 1, 1, 1, 2), 81, 2},
	}
	for _, tt := range tests {
		if got := Percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: Percentile(%v, %v) = %v, want %v", tt.name, tt.sorted, tt.p, got, tt.want)
		}
	}
}

func TestLoadgenSummarize(t *testing.T) {
	s := Summarize(durations(40, 10, 30, 20, 100, 60, 50, 90, 70, 80))
	want := Summary{Count: 10, Min: 10, Mean: 55, P50: 50, P95: 100, P99: 100, Max: 100}
	if s != want {
		t.Errorf("Summarize = %+v, want %+v", s, want)
	}
	if (Summarize(nil) != Summary{}) {
		t.Error("Summarize(nil) is not zero")
	}
}
