package loadgen

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"strconv"
)

// Page is a self-contained HTML report: inline SVG and CSS, nothing fetched.
type Page struct {
	Title    string
	Subtitle string
	// Compare, when set, is a bar chart of our figures and the references
	// measured in the same run, with a table of them.
	Compare *Comparison
	Runs    []NamedRun // loads to chart over time, ours first
	Notes   []string
}

// NamedRun is one load's result under the name the page gives it.
type NamedRun struct {
	Name   string
	Result *Result
}

// Comparison is the same-run figures of make bench.
type Comparison struct {
	Title string
	Unit  string
	Rows  []ComparisonRow
}

// ComparisonRow is one part measured; zero figures are not available.
type ComparisonRow struct {
	Part         string
	Rate         float64
	P50MS, P99MS float64
	Ours         bool
}

// WriteHTMLFile writes one run's page (loadgen -html).
func WriteHTMLFile(path string, r *Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	mode := "checked"
	if r.Config.Noop {
		mode = "no-op reference, answers not checked"
	}
	p := Page{
		Title: "loadgen: " + r.Config.URL,
		Subtitle: fmt.Sprintf("%s; %d users, %d envelopes x %d packets, repeat %.2f; stopped by %s after %.1f s",
			mode, r.Config.Users, r.Config.Envelopes, r.Config.Packets, r.Config.Repeat, r.StopReason, r.ElapsedS),
		Runs: []NamedRun{{Name: "target", Result: r}},
	}
	if err := p.Write(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Write renders the page.
func (p Page) Write(w io.Writer) error {
	data := struct {
		Page
		Charts []template.HTML
	}{Page: p, Charts: p.charts()}
	return pageTemplate.Execute(w, data)
}

func (p Page) charts() []template.HTML {
	var out []template.HTML
	if c := p.Compare; c != nil {
		bars := make([]bar, len(c.Rows))
		for i, r := range c.Rows {
			bars[i] = bar{Label: r.Part, Value: r.Rate, Ours: r.Ours}
		}
		out = append(out, barChart("chart-compare", c.Title, c.Unit, bars))
	}
	ms := func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
	secs := func(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) + "s" }
	dashes := []string{"", "6 4", "2 3", "10 3 2 3"}
	var rate, lat, hist, lag []chartSeries
	for i, run := range p.Runs {
		r, dash := run.Result, dashes[i%len(dashes)]
		var at, grabs, granted, p50, p95, p99, fAt, f50, f99, fMax []float64
		for _, s := range r.Timeline {
			mid := s.AtS + s.DurS/2
			at = append(at, mid)
			grabs = append(grabs, float64(s.Grabs)/s.DurS)
			granted = append(granted, float64(s.Granted)/s.DurS)
			p50, p95, p99 = append(p50, s.P50US/1000), append(p95, s.P95US/1000), append(p99, s.P99US/1000)
			if s.FlushClaims > 0 {
				fAt = append(fAt, mid)
				f50, f99, fMax = append(f50, s.FlushP50MS), append(f99, s.FlushP99MS), append(fMax, s.FlushMaxMS)
			}
		}
		name := run.Name
		rate = append(rate, chartSeries{Name: name + " grabs/s", X: at, Y: grabs, Color: palette[0], Dash: dash},
			chartSeries{Name: name + " granted/s", X: at, Y: granted, Color: palette[2], Dash: dash})
		lat = append(lat, chartSeries{Name: name + " p50", X: at, Y: p50, Color: palette[0], Dash: dash},
			chartSeries{Name: name + " p95", X: at, Y: p95, Color: palette[3], Dash: dash},
			chartSeries{Name: name + " p99", X: at, Y: p99, Color: palette[1], Dash: dash})
		var hx, hy []float64
		for _, b := range r.Histogram {
			// A step starts at its bucket's lower bound (quarter octaves).
			hx = append(hx, b.LeUS/math.Pow(2, 0.25))
			hy = append(hy, 100*float64(b.Count)/float64(max(r.Latency.Count, 1)))
		}
		hist = append(hist, chartSeries{Name: name, X: hx, Y: hy, Color: palette[i%len(palette)], Step: true})
		if len(fAt) > 0 {
			lag = append(lag, chartSeries{Name: name + " p50", X: fAt, Y: f50, Color: palette[0], Dash: dash},
				chartSeries{Name: name + " p99", X: fAt, Y: f99, Color: palette[1], Dash: dash},
				chartSeries{Name: name + " max", X: fAt, Y: fMax, Color: palette[4], Dash: dash})
		}
	}
	pct := func(v float64) string { return strconv.FormatFloat(v, 'g', 3, 64) + "%" }
	return append(out,
		lineChart{ID: "chart-rate", Title: "Grabs per second", XLabel: "seconds into the load", YLabel: "answers per second",
			Series: rate, XFmt: secs, YFmt: fmtCount, Empty: "no grab answered"}.SVG(),
		lineChart{ID: "chart-latency", Title: "Latency percentiles over time", XLabel: "seconds into the load",
			YLabel: "ms", Series: lat, XFmt: secs, YFmt: ms, Empty: "no grab answered"}.SVG(),
		lineChart{ID: "chart-histogram", Title: "Latency histogram (share of answers)", XLabel: "latency (log scale)",
			YLabel: "% of answers", Series: hist, LogX: true, XFmt: fmtDurUS, YFmt: pct, Empty: "no grab answered"}.SVG(),
		lineChart{ID: "chart-flush", Title: "Flush lag: answer to PostgreSQL, by second of the answer",
			XLabel: "seconds into the load", YLabel: "ms", Series: lag, XFmt: secs, YFmt: ms,
			Empty: "not measured: run loadgen with -database-url"}.SVG())
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"count": fmtCount,
	"us":    fmtDurUS,
	"f2":    func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 820px; }
h1 { font-size: 20px; margin: 0 0 4px; } p.sub { color: #555; margin: 0 0 16px; }
table { border-collapse: collapse; margin: 8px 0 16px; } td, th { padding: 3px 10px; border-bottom: 1px solid #ddd; text-align: right; }
td:first-child, th:first-child { text-align: left; }
svg.chart { display: block; margin: 12px 0 20px; font-size: 11px; }
svg .title { font-size: 13px; font-weight: 600; } svg .plot { fill: #fafafa; stroke: #ccc; }
svg .grid { stroke: #e4e4e4; } svg .tick { stroke: #888; } svg .series { stroke-width: 1.8; }
svg .ytick, svg .barlabel { text-anchor: end; } svg .xtick, svg .xlabel, svg .empty { text-anchor: middle; }
svg .empty { fill: #888; font-size: 13px; } svg .ylabel { text-anchor: middle; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="sub">{{.Subtitle}}</p>
{{with .Compare}}<table id="compare">
<tr><th>part</th><th>{{.Unit}}</th><th>p50 ms</th><th>p99 ms</th></tr>
{{range .Rows}}<tr><td>{{if .Ours}}<b>{{.Part}}</b>{{else}}{{.Part}}{{end}}</td><td>{{if .Rate}}{{count .Rate}}{{else}}n/a{{end}}</td><td>{{if .P50MS}}{{f2 .P50MS}}{{end}}</td><td>{{if .P99MS}}{{f2 .P99MS}}{{end}}</td></tr>
{{end}}</table>{{end}}
<table id="runs">
<tr><th>load</th><th>grabs</th><th>grabs/s</th><th>p50</th><th>p95</th><th>p99</th><th>max</th><th>errors</th><th>flush p50</th><th>flush p99</th></tr>
{{range .Runs}}<tr><td>{{.Name}}</td>{{with .Result}}<td>{{.Grabs}}</td><td>{{count .GrabsPerS}}</td><td>{{us .Latency.P50}}</td><td>{{us .Latency.P95}}</td><td>{{us .Latency.P99}}</td><td>{{us .Latency.Max}}</td><td>{{.Errors}}</td>{{with .Flush}}<td>{{f2 .Lag.P50}} ms</td><td>{{f2 .Lag.P99}} ms</td>{{else}}<td>-</td><td>-</td>{{end}}{{end}}</tr>
{{end}}
</table>
{{range .Charts}}{{.}}
{{end}}
{{range .Notes}}<p>{{.}}</p>
{{end}}
<p class="sub">Written by loadgen; the charts are inline SVG and the page loads nothing else.</p>
</body>
</html>
`))
