package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"redpacket/internal/envelope"
)

// The redpacket_* metrics each daemon exports, and only those.
var (
	grabberOwn = []string{"redpacket_build_info", "redpacket_dependency_up",
		"redpacket_grabs_total", "redpacket_grab_duration_seconds",
		"redpacket_sequence_fetches_total", "redpacket_sequence_fetch_duration_seconds",
		"redpacket_http_requests_total", "redpacket_http_request_duration_seconds"}
	flusherOwn = []string{"redpacket_build_info", "redpacket_dependency_up",
		"redpacket_pending_claims", "redpacket_flush_batch_size", "redpacket_flush_batch_duration_seconds",
		"redpacket_flush_phase_duration_seconds",
		"redpacket_flush_lag_seconds", "redpacket_flush_errors_total", "redpacket_claim_conflicts_total",
		"redpacket_claims_rejected_total", "redpacket_envelopes_suspended_total",
		"redpacket_webhook_deliveries_total", "redpacket_events_pruned_total",
		"redpacket_envelopes_finished_total", "redpacket_refunded_cents_total", "redpacket_settled_cents_total",
		"redpacket_suspended_envelopes", "redpacket_webhook_pending_events",
		"redpacket_audit_last_run_timestamp_seconds", "redpacket_audit_violations",
		"redpacket_redis_memory_used_ratio", "redpacket_settlement_overdue_seconds"}
)

// testRegistries are the daemons' registries as they stand once started:
// the static metrics plus what each daemon registers with its clients, here
// with stand-ins for the servers.
func testRegistries(ledger func(context.Context) (Ledger, error)) (grabber, flusher *Registry) {
	up := map[string]Check{"postgres": func(context.Context) error { return nil },
		"redis": func(context.Context) error { return nil }}
	grabber = newRegistry(grabberCollectors()...)
	grabber.MustRegister(NewDependencyCollector(up))
	flusher = newRegistry(flusherCollectors()...)
	flusher.MustRegister(NewDependencyCollector(up), NewLedgerCollector(ledger),
		NewRedisMemoryCollector(func(context.Context) (float64, error) { return 0.5, nil }))
	return grabber, flusher
}

// seedHTTP sends one request through the middleware, so the HTTP series
// exist, on a route of its own (other tests count theirs).
func seedHTTP() {
	mux := http.NewServeMux()
	mux.Handle("GET /seed", http.NotFoundHandler())
	InstrumentHTTP(mux).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/seed", nil))
}

func emptyLedger(context.Context) (Ledger, error) { return Ledger{}, nil }

func gather(t *testing.T, r *Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func TestEachDaemonExportsOnlyItsOwnMetrics(t *testing.T) {
	seedHTTP()
	grabber, flusher := testRegistries(emptyLedger)
	for _, c := range []struct {
		name string
		r    *Registry
		own  []string
	}{{"grabber", grabber, grabberOwn}, {"flusher", flusher, flusherOwn}} {
		got := gather(t, c.r)
		for name := range got {
			if strings.HasPrefix(name, "redpacket_") && !slices.Contains(c.own, name) {
				t.Errorf("%s exports %s, a metric of the other daemon or of none", c.name, name)
			}
		}
		for _, name := range c.own {
			// Pending claims are per shard, published by the first settle
			// round, once the shards are read from Redis.
			if got[name] == nil && name != "redpacket_pending_claims" {
				t.Errorf("%s does not export %s", c.name, name)
			}
		}
		for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
			if got[name] == nil {
				t.Errorf("%s does not export %s", c.name, name)
			}
		}
	}
}

// Every label value an alert may name exists, at zero, before anything
// happened.
func TestLabelledCountersStartAtZero(t *testing.T) {
	t.Parallel()
	grabber, flusher := testRegistries(emptyLedger)
	for _, c := range []struct {
		r      *Registry
		metric string
		label  string
		values []string
	}{
		{grabber, "redpacket_grabs_total", "result", labels(GrabResults)},
		{grabber, "redpacket_sequence_fetches_total", "key", SequenceKeys},
		{flusher, "redpacket_claim_conflicts_total", "reason", ConflictReasons},
		{flusher, "redpacket_envelopes_finished_total", "status", labels(FinishedStatuses)},
		{flusher, "redpacket_webhook_deliveries_total", "result", labels(WebhookResults)},
	} {
		mf := gather(t, c.r)[c.metric]
		if mf == nil {
			t.Errorf("%s missing", c.metric)
			continue
		}
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == c.label {
					seen[l.GetValue()] = true
				}
			}
		}
		for _, v := range c.values {
			if !seen[v] {
				t.Errorf("%s{%s=%q} does not exist before the first event", c.metric, c.label, v)
			}
		}
	}
	for _, name := range []string{"redpacket_refunded_cents_total", "redpacket_settled_cents_total",
		"redpacket_suspended_envelopes", "redpacket_audit_violations"} {
		if mf := gather(t, flusher)[name]; mf == nil || len(mf.GetMetric()) != 1 {
			t.Errorf("%s is not one series at start: %v", name, mf)
		}
	}
}

func TestBuildInfo(t *testing.T) {
	t.Parallel()
	b := BuildInfo()
	t.Logf("built from %+v", b)
	if b.Version == "" || b.Commit == "" || !strings.HasPrefix(b.GoVersion, "go") {
		t.Errorf("BuildInfo() = %+v: every field must be set", b)
	}
	grabber, _ := testRegistries(emptyLedger)
	mf := gather(t, grabber)["redpacket_build_info"]
	if mf == nil || len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("redpacket_build_info: %v, want one series at 1", mf)
	}
	labels := map[string]string{}
	for _, l := range mf.GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] != b.Version || labels["commit"] != b.Commit || labels["go_version"] != b.GoVersion {
		t.Errorf("redpacket_build_info labels %v, want %+v", labels, b)
	}
}

func TestLedgerIsReadAtScrapeAndKeptWhenPostgresFails(t *testing.T) {
	t.Parallel()
	l := Ledger{
		Finished: map[envelope.Status]Finished{
			"settled": {Envelopes: 3, ClaimedCents: 700, RefundedCents: 300},
			"failed":  {Envelopes: 1, RefundedCents: 50},
		},
		Suspended: 2, WebhookPending: 9,
		Audit:             AuditRun{FinishedAt: time.Unix(1700000000, 500e6), Violations: 4},
		SettlementOverdue: 90*time.Second + 250*time.Millisecond,
	}
	var fail bool
	_, flusher := testRegistries(func(context.Context) (Ledger, error) {
		if fail {
			return Ledger{}, errors.New("postgres down")
		}
		return l, nil
	})
	want := map[string]float64{
		`redpacket_envelopes_finished_total{status="settled"}`: 3,
		`redpacket_envelopes_finished_total{status="failed"}`:  1,
		"redpacket_refunded_cents_total":                       350,
		"redpacket_settled_cents_total":                        700,
		"redpacket_suspended_envelopes":                        2,
		"redpacket_webhook_pending_events":                     9,
		"redpacket_audit_last_run_timestamp_seconds":           1700000000.5,
		"redpacket_audit_violations":                           4,
		"redpacket_settlement_overdue_seconds":                 90.25,
	}
	for _, fail = range []bool{false, true} {
		got := values(gather(t, flusher))
		for k, v := range want {
			if got[k] != v {
				t.Errorf("read failing %v: %s = %v, want %v", fail, k, got[k], v)
			}
		}
	}
}

func TestDependencyUp(t *testing.T) {
	t.Parallel()
	r := newRegistry()
	r.MustRegister(NewDependencyCollector(map[string]Check{
		"postgres": func(context.Context) error { return nil },
		"redis":    func(context.Context) error { return errors.New("connection refused") },
	}))
	got := values(gather(t, r))
	if got[`redpacket_dependency_up{dependency="postgres"}`] != 1 || got[`redpacket_dependency_up{dependency="redis"}`] != 0 {
		t.Errorf("dependency_up: %v, want postgres 1, redis 0", got)
	}
}

// values flattens gauges and counters to name{labels} -> value.
func values(mfs map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := name
			if ls := m.GetLabel(); len(ls) > 0 {
				var parts []string
				for _, l := range ls {
					parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
				}
				key += "{" + strings.Join(parts, ",") + "}"
			}
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// promtool (Debian package prometheus) lints each daemon's /metrics.
func TestPromtoolCheckMetrics(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed (Debian: apt-get install prometheus; or from a Prometheus release): ", err)
	}
	seedHTTP()
	grabber, flusher := testRegistries(emptyLedger)
	for name, r := range map[string]*Registry{"grabber": grabber, "flusher": flusher} {
		srv := httptest.NewServer(r.Handler())
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(string(body))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: promtool check metrics: %v\n%s", name, err, out)
		}
	}
}

var _ prometheus.Collector = dependencies(nil)

// labels are typed label values as the metrics carry them.
func labels[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}
