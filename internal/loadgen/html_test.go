package loadgen

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium finds headless Chromium (Debian package chromium; CHROMIUM names
// another binary). The rendering tests fail without it rather than skip:
// CI installs it.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("headless Chromium is needed to check the HTML report (Debian: apt-get install chromium; or set CHROMIUM)")
	return ""
}

// headless runs Chromium on a local file with everything that reaches out
// turned off, and returns its standard output.
func headless(t *testing.T, page string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}, args...)
	cmd := exec.CommandContext(ctx, chromium(t), append(args, "file://"+page)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// sampleResult is a short real run against the no-op handler, with flush
// lags added to its seconds (measuring them needs PostgreSQL).
func sampleResult(t *testing.T) *Result {
	t.Helper()
	c := testConfig("")
	c.Noop, c.Grabs, c.Duration = true, 0, 2200*time.Millisecond
	code, r, stderr := runAgainst(t, NoopHandler(), c)
	if code != 0 || len(r.Timeline) != 2 || len(r.Histogram) == 0 {
		t.Fatalf("exit %d, %d seconds, %d histogram buckets; stderr %s", code, len(r.Timeline), len(r.Histogram), stderr)
	}
	for i := range r.Timeline {
		s := &r.Timeline[i]
		s.FlushClaims, s.FlushP50MS, s.FlushP99MS, s.FlushMaxMS = 100, 40+float64(i), 90, 120
	}
	r.Flush = &FlushResult{Claims: 200, Seen: 200, Complete: true, Lag: LagMS{Count: 200, P50: 41, P99: 90}}
	return &r
}

var (
	svgOpen = regexp.MustCompile(`<svg id="(chart-[a-z]+)"`)
	// A drawn series: a path with at least two points.
	drawn = regexp.MustCompile(`<path class="series" data-series="[^"]*" d="M[0-9.]+ [0-9.]+ L`)
)

// checkSelfContained: nothing in the page would be fetched.
func checkSelfContained(t *testing.T, page []byte) {
	t.Helper()
	for _, bad := range []string{"<script", "<link", "<img", "<iframe", "src=", "href=", "url(", "@import"} {
		if bytes.Contains(page, []byte(bad)) {
			t.Errorf("the page contains %q: it must load nothing", bad)
		}
	}
}

// chartsIn returns the chart ids of a DOM and how many drawn series each has.
func chartsIn(dom string) map[string]int {
	out := map[string]int{}
	for _, part := range strings.Split(dom, "</svg>") {
		if m := svgOpen.FindStringSubmatch(part); m != nil {
			out[m[1]] = len(drawn.FindAllString(part, -1))
		}
	}
	return out
}

// The page of one run opens in a browser with its four charts drawn, and
// its screenshot shows them.
func TestHTMLReportRendersInChromium(t *testing.T) {
	t.Parallel()
	r := sampleResult(t)
	page := filepath.Join(t.TempDir(), "report.html")
	if err := WriteHTMLFile(page, r); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	checkSelfContained(t, raw)

	dom := string(headless(t, page, "--dump-dom"))
	charts := chartsIn(dom)
	for id, minSeries := range map[string]int{"chart-rate": 2, "chart-latency": 3, "chart-histogram": 1, "chart-flush": 3} {
		if charts[id] < minSeries {
			t.Errorf("the rendered DOM has %d drawn series in %s, want at least %d (charts: %v)", charts[id], id, minSeries, charts)
		}
	}
	if !strings.Contains(dom, `<table id="runs">`) || !strings.Contains(dom, "<td>target</td>") {
		t.Error("the rendered DOM lacks the table of the run")
	}

	shot := filepath.Join(t.TempDir(), "report.png")
	headless(t, page, "--window-size=900,1700", "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	// The charts' lines are drawn in colour: count the strongly coloured
	// pixels (grey text and white background have r = g = b).
	b, colored := img.Bounds(), 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if max(r, g, bl)-min(r, g, bl) > 0x4000 {
				colored++
			}
		}
	}
	if b.Dx() != 900 || colored < 500 {
		t.Errorf("screenshot %dx%d with %d coloured pixels (of every fourth); the charts did not render", b.Dx(), b.Dy(), colored)
	}
}

// The page of make bench compares our figures with the references, and
// charts both loads over time.
func TestBenchPageRendersInChromium(t *testing.T) {
	t.Parallel()
	r := sampleResult(t)
	noop := *r
	noop.Flush = nil
	b := benchResults{Date: "2026-11-23T00:00:00Z", Commit: "abc1234", CPUs: 2, LoadAverage: "1.0 1.0 1.0", Users: 50,
		Original: rbPart{RPS: 60000, P50MS: 0.6, P99MS: 1.4}, Pipelined: rbPart{RPS: 120000}, Grabber: r, Noop: &noop}
	b.InProcess.NSPerGrab = 20000
	page := filepath.Join(t.TempDir(), "bench.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := benchPage(b).Write(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(page)
	checkSelfContained(t, raw)
	dom := string(headless(t, page, "--dump-dom"))
	charts := chartsIn(dom)
	for _, id := range []string{"chart-compare", "chart-rate", "chart-latency", "chart-histogram", "chart-flush"} {
		if _, ok := charts[id]; !ok {
			t.Errorf("the rendered bench page lacks %s (charts: %v)", id, charts)
		}
	}
	if charts["chart-rate"] < 4 || strings.Count(dom, `<rect class="bar"`) != 6 {
		t.Errorf("%d series of grabs/s (want both loads), %d bars (want 6 parts)", charts["chart-rate"], strings.Count(dom, `<rect class="bar"`))
	}
	for _, want := range []string{"(c) loadgen -&gt; grabber", "(a) original.lua, redis-benchmark", "n/a"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the bench page lacks %q", want)
		}
	}
}
