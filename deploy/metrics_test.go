package deploy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"redpacket/internal/telemetry"
)

// startDaemons registers, once per test process, what the daemons register
// at start (the registries are the process's).
var startDaemons sync.Once

// family is an exported metric: its type and label names.
type family struct {
	typ    dto.MetricType
	labels []string
}

// exported gathers both daemons' registries as they stand once started: the
// static metrics, what each registers with its clients (stand-ins here), one
// request through the HTTP middleware and one shard's pending claims, so
// that every family has a series.
func exported(t *testing.T) map[string]family {
	t.Helper()
	startDaemons.Do(func() {
		ok := func(context.Context) error { return nil }
		checks := map[string]telemetry.Check{"postgres": ok, "redis": ok}
		telemetry.Grabber.MustRegister(telemetry.NewDependencyCollector(checks))
		telemetry.Flusher.MustRegister(telemetry.NewDependencyCollector(checks),
			telemetry.NewLedgerCollector(func(context.Context) (telemetry.Ledger, error) { return telemetry.Ledger{}, nil }),
			telemetry.NewRedisMemoryCollector(func(context.Context) (float64, error) { return 0, nil }))
		mux := http.NewServeMux()
		mux.Handle("GET /x", http.NotFoundHandler())
		telemetry.InstrumentHTTP(mux).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
		telemetry.PendingClaims.WithLabelValues("0").Set(0)
		telemetry.FlushBatches.WithLabelValues("0").Add(0)
	})

	out := map[string]family{}
	for _, r := range []*telemetry.Registry{telemetry.Grabber, telemetry.Flusher} {
		mfs, err := r.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			f := family{typ: mf.GetType()}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if !slices.Contains(f.labels, l.GetName()) {
						f.labels = append(f.labels, l.GetName())
					}
				}
			}
			out[mf.GetName()] = f
		}
	}
	return out
}

// expressions returns every PromQL expression of the dashboards and the
// alerting rules, by where it is.
func expressions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	dashboards, _ := filepath.Glob("grafana/dashboards/*.json")
	for _, path := range dashboards {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var walk func(where string, v any)
		walk = func(where string, v any) {
			switch v := v.(type) {
			case map[string]any:
				if title, ok := v["title"].(string); ok {
					where += " / " + title
				}
				if e, ok := v["expr"].(string); ok {
					out[where+" "+v["refId"].(string)] = e
				}
				for _, c := range v {
					walk(where, c)
				}
			case []any:
				for _, c := range v {
					walk(where, c)
				}
			}
		}
		walk(path, doc)
	}
	rules, _ := filepath.Glob("prometheus/rules/*.yml")
	for _, path := range rules {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Groups []struct {
				Rules []struct {
					Alert, Record, Expr string
				}
			}
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, g := range doc.Groups {
			for _, r := range g.Rules {
				out[path+" "+r.Alert+r.Record] = r.Expr
			}
		}
	}
	if len(dashboards) == 0 || len(rules) == 0 || len(out) < 20 {
		t.Fatalf("found %d dashboards, %d rule files, %d expressions", len(dashboards), len(rules), len(out))
	}
	return out
}

var (
	metricName = regexp.MustCompile(`\bredpacket_[a-zA-Z0-9_]+`)
	selector   = regexp.MustCompile(`\b(redpacket_[a-zA-Z0-9_]+|up)\s*\{([^}]*)\}`)
	matcher    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	byLabels   = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
)

// Every metric the dashboards and the alerting rules name is exported by a
// daemon, with the labels they select on; every job they name is scraped.
func TestDashboardsAndRulesNameExportedMetrics(t *testing.T) {
	fams := exported(t)
	jobs := scrapedJobs(t)
	resolve := func(name string) (family, bool) {
		if f, ok := fams[name]; ok {
			return f, true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok {
				if f, ok := fams[base]; ok && f.typ == dto.MetricType_HISTOGRAM {
					if suffix == "_bucket" {
						f.labels = append(slices.Clone(f.labels), "le")
					}
					return f, true
				}
			}
		}
		return family{}, false
	}
	named := map[string]bool{}
	for where, expr := range expressions(t) {
		var labels []string // every label the expression may select or group on
		for _, name := range metricName.FindAllString(expr, -1) {
			named[name] = true
			f, ok := resolve(name)
			if !ok {
				t.Errorf("%s: %s is not exported by the grabber or the flusher", where, name)
				continue
			}
			labels = append(labels, f.labels...)
		}
		labels = append(labels, "job", "instance") // added by the scrape
		for _, s := range selector.FindAllStringSubmatch(expr, -1) {
			for _, m := range matcher.FindAllStringSubmatch(s[2], -1) {
				f, _ := resolve(s[1])
				if s[1] != "up" && !slices.Contains(append(f.labels, "job", "instance"), m[1]) {
					t.Errorf("%s: %s has no label %s", where, s[1], m[1])
				}
				if m[1] == "job" {
					checkJob(t, where, m[2], m[3], jobs)
				}
			}
		}
		for _, g := range byLabels.FindAllStringSubmatch(expr, -1) {
			for l := range strings.SplitSeq(g[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(labels, l) {
					t.Errorf("%s: groups by %s, which none of its metrics has", where, l)
				}
			}
		}
	}
	// The dashboard covers what the issue of an operator asks for.
	for _, want := range []string{"redpacket_grabs_total", "redpacket_grab_duration_seconds_bucket",
		"redpacket_flush_lag_seconds_bucket", "redpacket_pending_claims", "redpacket_suspended_envelopes",
		"redpacket_webhook_pending_events", "redpacket_webhook_deliveries_total", "redpacket_settled_cents_total",
		"redpacket_refunded_cents_total", "redpacket_dependency_up", "redpacket_audit_violations"} {
		if !named[want] {
			t.Errorf("neither the dashboard nor the rules use %s", want)
		}
	}
}

// scrapedJobs are the job names of deploy/prometheus/prometheus.yml.
func scrapedJobs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, s := range cfg.ScrapeConfigs {
		jobs = append(jobs, s.JobName)
	}
	return jobs
}

func checkJob(t *testing.T, where, op, value string, jobs []string) {
	t.Helper()
	switch op {
	case "=":
		if !slices.Contains(jobs, value) {
			t.Errorf("%s: job %q is not scraped (jobs: %v)", where, value, jobs)
		}
	case "=~":
		re, err := regexp.Compile("^(?:" + value + ")$")
		if err != nil {
			t.Errorf("%s: job regexp %q: %v", where, value, err)
			return
		}
		for _, j := range jobs {
			if re.MatchString(j) {
				return
			}
		}
		t.Errorf("%s: job =~ %q matches none of %v", where, value, jobs)
	}
}

// promtool (Debian package prometheus) checks the configuration and the
// rules, and runs the rules' unit tests; CI runs the same commands.
func TestPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed (Debian: apt-get install prometheus): ", err)
	}
	tests, _ := filepath.Glob("prometheus/tests/*.yml")
	rules, _ := filepath.Glob("prometheus/rules/*.yml")
	for _, args := range [][]string{
		{"check", "config", "prometheus/prometheus.yml"},
		append([]string{"check", "rules"}, rules...),
		append([]string{"test", "rules"}, tests...),
	} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
