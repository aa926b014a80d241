package e2e_test

import (
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"redpacket/internal/testenv"
)

// A fresh deployment's /metrics, as an operator's Prometheus first scrapes
// them: each daemon exports its build, its servers' readiness and every
// series an alert names, at zero; nothing of the other daemon; and promtool
// finds nothing to lint. `healthcheck` (the container's health check) passes
// while each daemon runs and fails once it stopped.
func TestOperationsMetricsAndHealthchecks(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed (Debian: apt-get install prometheus): ", err)
	}
	_, prefix := testenv.Redis(t)
	s := startStack(t, testenv.PostgresURL(t), testenv.RedisURL(t), prefix)

	grabber := scrape(t, s.base+"/metrics")
	flusher := scrape(t, s.flusherURL+"/metrics")
	for _, m := range []daemonMetrics{
		{"grabber", grabber,
			[]string{`redpacket_grabs_total{result="granted"}`, `redpacket_grabs_total{result="unavailable"}`,
				`redpacket_grabs_total{result="sold_out"}`, `redpacket_sequence_fetches_total{key="packet"}`},
			[]string{`redpacket_dependency_up{dependency="postgres"}`, `redpacket_dependency_up{dependency="redis"}`},
			[]string{"redpacket_flush_", "redpacket_pending_claims", "redpacket_claim_conflicts_total",
				"redpacket_webhook_", "redpacket_refunded_cents_total", "redpacket_envelopes_"}},
		{"flusher", flusher,
			[]string{`redpacket_claim_conflicts_total{reason="claimed_by_another_user"}`,
				`redpacket_claim_conflicts_total{reason="unknown_packet"}`,
				`redpacket_envelopes_finished_total{status="settled"}`, `redpacket_envelopes_finished_total{status="failed"}`,
				`redpacket_webhook_deliveries_total{result="failed"}`, `redpacket_webhook_deliveries_total{result="delivered"}`,
				"redpacket_refunded_cents_total", "redpacket_suspended_envelopes", "redpacket_audit_violations",
				"redpacket_settlement_overdue_seconds",
				"redpacket_envelopes_suspended_total", "redpacket_flush_errors_total"},
			[]string{`redpacket_dependency_up{dependency="postgres"}`, `redpacket_dependency_up{dependency="redis"}`},
			[]string{"redpacket_grabs_total", "redpacket_grab_duration", "redpacket_http_", "redpacket_sequence_"}},
	} {
		checkDaemonMetrics(t, promtool, m)
	}
	// The HTTP metrics count the scrape itself, by route.
	if v, ok := metricValue(scrape(t, s.base+"/metrics"), `redpacket_http_requests_total{code="2xx",route="GET /metrics"}`); !ok || v < 1 {
		t.Errorf("grabber: the scrape of /metrics is not counted by route (%v, %v)", v, ok)
	}

	for _, d := range []string{"grabber", "flusher"} {
		if code, out := run(t, d, s.env, "healthcheck"); code != 0 {
			t.Errorf("%s healthcheck while it runs: exit %d: %s", d, code, out)
		}
	}
	s.stop(t)
	for _, d := range []string{"grabber", "flusher"} {
		if code, out := run(t, d, s.env, "healthcheck"); code != 1 || !strings.Contains(out, d+" healthcheck:") {
			t.Errorf("%s healthcheck once it stopped: exit %d: %s; want 1 and the reason", d, code, out)
		}
	}
}

// daemonMetrics is what one daemon's /metrics must show.
type daemonMetrics struct {
	daemon, text string
	zero         []string // series that must exist at 0
	one          []string // series that must exist at 1
	foreign      []string // metrics of the other daemon
}

// checkDaemonMetrics fails the test unless m.text has its zero and one
// series at those values, none of the other daemon's metrics, the build
// info, and passes `promtool check metrics`.
func checkDaemonMetrics(t *testing.T, promtool string, m daemonMetrics) {
	t.Helper()
	for _, series := range m.zero {
		if v, ok := metricValue(m.text, series); !ok || v != 0 {
			t.Errorf("%s: %s = %v (present %v), want 0 from the start", m.daemon, series, v, ok)
		}
	}
	for _, series := range m.one {
		if v, ok := metricValue(m.text, series); !ok || v != 1 {
			t.Errorf("%s: %s = %v (present %v), want 1", m.daemon, series, v, ok)
		}
	}
	for _, prefix := range m.foreign {
		if strings.Contains(m.text, "\n"+prefix) {
			t.Errorf("%s exports %s*, a metric of the other daemon", m.daemon, prefix)
		}
	}
	if !regexp.MustCompile(`(?m)^redpacket_build_info\{commit="[^"]+",go_version="go[^"]+",version="[^"]+"\} 1$`).
		MatchString(m.text) {
		t.Errorf("%s: no redpacket_build_info{commit,go_version,version} 1", m.daemon)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(m.text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s: promtool check metrics: %v\n%s", m.daemon, err, out)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(body)
}

// metricValue finds one series (name and labels exactly as exposed) in the
// text format.
func metricValue(text, series string) (float64, bool) {
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		return v, err == nil
	}
	return 0, false
}
