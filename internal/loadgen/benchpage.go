package loadgen

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
)

// benchResults is the part of bench/run.sh's JSON the page shows.
type benchResults struct {
	Date        string  `json:"date"`
	Commit      string  `json:"commit"`
	CPUs        int     `json:"cpus"`
	LoadAverage string  `json:"load_average"`
	Users       int     `json:"users"`
	Original    rbPart  `json:"original_lua"`
	Pipelined   rbPart  `json:"original_lua_pipelined"`
	Shipped     rbPart  `json:"shipped_grab_lua"`
	Noop        *Result `json:"noop_server"`
	Grabber     *Result `json:"grabber"`
	InProcess   struct {
		NSPerGrab  float64 `json:"ns_per_grab"`
		DrainPerS  float64 `json:"drain_claims_per_s"`
		Create100k float64 `json:"create_100k_ns"`
	} `json:"in_process"`
}

// rbPart is one redis-benchmark run; zero when it was skipped.
type rbPart struct {
	RPS   float64 `json:"rps"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
}

// BenchPage is `loadgen bench-page -in bench/results/<date>.json -out <page>.html`:
// one page comparing the service's figures of a make bench run with the
// references measured in the same run.
func BenchPage(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen bench-page", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "the JSON bench/run.sh wrote")
	out := fs.String("out", "", "the HTML page to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("bench-page needs -in and -out")
	}
	raw, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	var b benchResults
	if err := json.Unmarshal(raw, &b); err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := benchPage(b).Write(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func benchPage(b benchResults) Page {
	p := Page{
		Title: "make bench, " + b.Date,
		Subtitle: fmt.Sprintf("commit %s; %d CPUs, load average %s; %d concurrent clients in every part",
			b.Commit, b.CPUs, b.LoadAverage, b.Users),
		Compare: &Comparison{Title: "Grabs (or script calls) per second, same run", Unit: "per second"},
	}
	rows := []ComparisonRow{
		{Part: "(a) original.lua, redis-benchmark", Rate: b.Original.RPS, P50MS: b.Original.P50MS, P99MS: b.Original.P99MS},
		{Part: "(a) original.lua, redis-benchmark -P 16", Rate: b.Pipelined.RPS, P50MS: b.Pipelined.P50MS, P99MS: b.Pipelined.P99MS},
		{Part: "(a') grab.lua, redis-benchmark", Rate: b.Shipped.RPS, P50MS: b.Shipped.P50MS, P99MS: b.Shipped.P99MS},
	}
	if r := b.Noop; r != nil {
		rows = append(rows, ComparisonRow{Part: "(b) loadgen -> no-op server (HTTP only)", Rate: r.GrabsPerS,
			P50MS: r.Latency.P50 / 1000, P99MS: r.Latency.P99 / 1000})
	}
	if r := b.Grabber; r != nil {
		rows = append(rows, ComparisonRow{Part: "(c) loadgen -> grabber (+Redis, flusher, PG)", Rate: r.GrabsPerS,
			P50MS: r.Latency.P50 / 1000, P99MS: r.Latency.P99 / 1000, Ours: true})
	}
	if ns := b.InProcess.NSPerGrab; ns > 0 {
		rows = append(rows, ComparisonRow{Part: "(d) grab service in process, 64 callers", Rate: 1e9 / ns, Ours: true})
	}
	p.Compare.Rows = rows
	if b.Grabber != nil {
		p.Runs = append(p.Runs, NamedRun{Name: "(c) grabber", Result: b.Grabber})
	}
	if b.Noop != nil {
		p.Runs = append(p.Runs, NamedRun{Name: "(b) no-op", Result: b.Noop})
	}
	ratio := func(ours, ref float64) string {
		if ours == 0 || ref == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.3f", ours/ref)
	}
	if b.Grabber != nil && b.Noop != nil {
		p.Notes = append(p.Notes,
			fmt.Sprintf("(c) / (b), the grabber against the HTTP stack alone: %s. (c) / (a), against the source design's script without pipelining: %s.",
				ratio(b.Grabber.GrabsPerS, b.Noop.GrabsPerS), ratio(b.Grabber.GrabsPerS, b.Original.RPS)))
	}
	if b.InProcess.DrainPerS > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("(e) the flusher drains %s claims/s in batches of 2,000; (f) creating a 100,000-packet envelope takes %.0f ms.",
			fmtCount(b.InProcess.DrainPerS), b.InProcess.Create100k/1e6))
	}
	p.Notes = append(p.Notes, "The charts over time show (c) solid and (b) dashed; see BENCHMARKS.md for how each part is measured.")
	return p
}
