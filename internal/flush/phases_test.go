package flush

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"redpacket/internal/telemetry"
	"redpacket/internal/testenv/stack"
)

// phaseSample is a histogram's sample count and sum.
type phaseSample struct {
	n   uint64
	sum float64
}

// readPhases reads the batch histogram (as "batch") and each phase's.
func readPhases(t testing.TB) map[string]phaseSample {
	t.Helper()
	metrics := map[string]prometheus.Metric{"batch": telemetry.FlushBatchSeconds}
	for _, p := range telemetry.FlushPhases {
		metrics[p] = telemetry.FlushPhaseSeconds.WithLabelValues(p).(prometheus.Metric)
	}
	out := map[string]phaseSample{}
	for name, h := range metrics {
		var m dto.Metric
		if err := h.Write(&m); err != nil {
			t.Fatal(err)
		}
		out[name] = phaseSample{m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()}
	}
	return out
}

// An operator reads from redpacket_flush_phase_duration_seconds which side a
// slow flusher waits on: each batch records each phase once, the phases add
// up to the batch's time, and time spent after the check (here a slow step
// before the ack) shows under ack, not under the ledger. Not parallel: the
// histograms are the process's.
func TestBatchPhasesAreTimed(t *testing.T) {
	s := stack.New(t)
	e, claims := s.Grabbed(t, 50, 40)
	// Long enough that a slow ledger phase stays below it: under -race,
	// with the other packages' tests on the same two cores, the two
	// batches' writes once took 247 ms against a pause of 100.
	const pause = 400 * time.Millisecond
	f := newFlusher(t, s, Config{BatchSize: 15, Pipeline: 2})
	f.afterCommit = func(int) error { time.Sleep(pause); return nil }
	before := readPhases(t)
	if err := f.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.AssertDurable(t, e.ID, claims)
	after := readPhases(t)
	const batches = 2 // 40 claims, two transactions of 15 a batch
	var phases float64
	for _, p := range append([]string{"batch"}, telemetry.FlushPhases...) {
		if n := after[p].n - before[p].n; n != batches {
			t.Errorf("%s: %d samples for %d batches", p, n, batches)
		}
		if p != "batch" {
			phases += after[p].sum - before[p].sum
		}
	}
	batch := after["batch"].sum - before["batch"].sum
	// The batch's time ends just after the ack: a phase not recorded would
	// leave out a pause (400 ms), far more than this.
	if phases > batch || batch-phases > 0.2 {
		t.Errorf("phases add up to %.4fs, the batches took %.4fs", phases, batch)
	}
	// The pauses are under ack, so not under the ledger (whose own time,
	// commits on a shared server checkpointing for other tests' dropped
	// databases, is not bounded here).
	if ack := after["ack"].sum - before["ack"].sum; ack < batches*pause.Seconds() {
		t.Errorf("ack phase %.4fs, want at least the %v paused before each ack", ack, pause)
	}
}
