package loadgen

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// Charts are drawn as inline SVG by hand, so a report is one file that
// fetches nothing: no script, no font, no stylesheet from the network.

const (
	chartW, chartH                     = 760, 300
	padLeft, padRight, padTop, padBott = 72, 16, 34, 46
)

// palette colours series in order; dashes tell runs apart on shared charts.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"}

type chartSeries struct {
	Name  string
	X, Y  []float64
	Color string
	Dash  string // stroke-dasharray; "" is solid
	Step  bool   // a histogram's steps rather than a line
}

type lineChart struct {
	ID, Title      string
	XLabel, YLabel string
	Series         []chartSeries
	LogX           bool
	XFmt, YFmt     func(float64) string
	Empty          string // shown when no series has a point
}

func (c lineChart) SVG() template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="%s" class="chart" role="img" aria-label="%s" viewBox="0 0 %d %d" width="%d" height="%d">`,
		esc(c.ID), esc(c.Title), chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<title>%s</title>`, esc(c.Title))
	fmt.Fprintf(&b, `<text class="title" x="%d" y="18">%s</text>`, padLeft, esc(c.Title))
	xmin, xmax, ymax, points := math.Inf(1), math.Inf(-1), 0.0, 0
	for _, s := range c.Series {
		for i, x := range s.X {
			if c.LogX && x <= 0 {
				continue
			}
			xmin, xmax, ymax = math.Min(xmin, x), math.Max(xmax, x), math.Max(ymax, s.Y[i])
			points++
		}
	}
	x0, y0, pw, ph := float64(padLeft), float64(chartH-padBott), float64(chartW-padLeft-padRight), float64(chartH-padTop-padBott)
	fmt.Fprintf(&b, `<rect class="plot" x="%d" y="%d" width="%.0f" height="%.0f"/>`, padLeft, padTop, pw, ph)
	if points == 0 {
		fmt.Fprintf(&b, `<text class="empty" x="%.0f" y="%.0f">%s</text></svg>`, x0+pw/2, y0-ph/2, esc(c.Empty))
		return template.HTML(b.String())
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	yTicks := niceTicks(0, ymax)
	ytop := yTicks[len(yTicks)-1]
	var xTicks []float64
	lx := func(v float64) float64 { return v }
	if c.LogX {
		lx = math.Log10
		xTicks = logTicks(xmin, xmax)
	} else {
		xTicks = niceTicks(xmin, xmax)
		xmin, xmax = math.Min(xmin, xTicks[0]), math.Max(xmax, xTicks[len(xTicks)-1])
	}
	sx := func(v float64) float64 { return x0 + (lx(v)-lx(xmin))/(lx(xmax)-lx(xmin))*pw }
	sy := func(v float64) float64 { return y0 - v/ytop*ph }
	for _, t := range yTicks {
		fmt.Fprintf(&b, `<line class="grid" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x0, sy(t), x0+pw, sy(t))
		fmt.Fprintf(&b, `<text class="ytick" x="%.1f" y="%.1f">%s</text>`, x0-6, sy(t)+4, esc(c.YFmt(t)))
	}
	for _, t := range xTicks {
		if t < xmin || t > xmax {
			continue
		}
		fmt.Fprintf(&b, `<line class="tick" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, sx(t), y0, sx(t), y0+5)
		fmt.Fprintf(&b, `<text class="xtick" x="%.1f" y="%.1f">%s</text>`, sx(t), y0+18, esc(c.XFmt(t)))
	}
	fmt.Fprintf(&b, `<text class="xlabel" x="%.1f" y="%d">%s</text>`, x0+pw/2, chartH-6, esc(c.XLabel))
	fmt.Fprintf(&b, `<text class="ylabel" transform="translate(14 %.1f) rotate(-90)">%s</text>`, y0-ph/2, esc(c.YLabel))
	for i, s := range c.Series {
		var d strings.Builder
		prevY := 0.0
		for j, x := range s.X {
			if c.LogX && x <= 0 {
				continue
			}
			cmd := "L"
			if d.Len() == 0 {
				cmd = "M"
			}
			if s.Step && d.Len() > 0 {
				fmt.Fprintf(&d, "L%.1f %.1f ", sx(x), sy(prevY))
			}
			fmt.Fprintf(&d, "%s%.1f %.1f ", cmd, sx(x), sy(s.Y[j]))
			prevY = s.Y[j]
		}
		dash := ""
		if s.Dash != "" {
			dash = ` stroke-dasharray="` + s.Dash + `"`
		}
		fmt.Fprintf(&b, `<path class="series" data-series="%s" d="%s" stroke="%s"%s fill="none"><title>%s</title></path>`,
			esc(s.Name), strings.TrimSpace(d.String()), s.Color, dash, esc(s.Name))
		// Legend, top right, one row per series.
		ly := padTop + 12 + 15*i
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%d" x2="%.0f" y2="%d" stroke="%s" stroke-width="2"%s/>`,
			x0+pw-190, ly-4, x0+pw-168, ly-4, s.Color, dash)
		fmt.Fprintf(&b, `<text class="legend" x="%.0f" y="%d">%s</text>`, x0+pw-162, ly, esc(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

type bar struct {
	Label, Note string
	Value       float64
	Ours        bool // the service's figures, drawn apart from the references
}

// barChart draws horizontal bars, one per part, scaled to the largest.
func barChart(id, title, unit string, bars []bar) template.HTML {
	const labelW, rowH = 330, 26
	h := padTop + rowH*len(bars) + 12
	var b strings.Builder
	fmt.Fprintf(&b, `<svg id="%s" class="chart" role="img" aria-label="%s" viewBox="0 0 %d %d" width="%d" height="%d">`,
		esc(id), esc(title), chartW, h, chartW, h)
	fmt.Fprintf(&b, `<title>%s</title><text class="title" x="8" y="18">%s</text>`, esc(title), esc(title))
	top := 0.0
	for _, r := range bars {
		top = math.Max(top, r.Value)
	}
	for i, r := range bars {
		y := padTop + rowH*i
		w := 0.0
		if top > 0 {
			w = r.Value / top * float64(chartW-labelW-110)
		}
		color := palette[0]
		if r.Ours {
			color = palette[1]
		}
		fmt.Fprintf(&b, `<text class="barlabel" x="%d" y="%d">%s</text>`, labelW-8, y+16, esc(r.Label))
		fmt.Fprintf(&b, `<rect class="bar" x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %s %s</title></rect>`,
			labelW, y+4, w, rowH-8, color, esc(r.Label), esc(fmtCount(r.Value)), esc(unit))
		value := fmtCount(r.Value) + " " + unit
		if r.Value == 0 {
			value = "n/a"
		}
		if r.Note != "" {
			value += "  " + r.Note
		}
		fmt.Fprintf(&b, `<text class="barvalue" x="%.1f" y="%d">%s</text>`, float64(labelW)+w+6, y+16, esc(value))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// niceTicks spans [lo, hi] in about five round steps (1, 2 or 5 times a
// power of ten), from a multiple of the step at or below lo.
func niceTicks(lo, hi float64) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Floor(lo/step) * step; ; v += step {
		out = append(out, v)
		if v >= hi {
			return out
		}
	}
}

// logTicks are 1, 2 and 5 times the powers of ten within [lo, hi].
func logTicks(lo, hi float64) []float64 {
	var out []float64
	for p := math.Floor(math.Log10(lo)); p <= math.Ceil(math.Log10(hi)); p++ {
		for _, m := range []float64{1, 2, 5} {
			if v := m * math.Pow(10, p); v >= lo && v <= hi {
				out = append(out, v)
			}
		}
	}
	return out
}

func esc(s string) string { return template.HTMLEscapeString(s) }

// fmtCount writes 12345.6 as "12,346".
func fmtCount(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// fmtDurUS writes microseconds the way a person reads them.
func fmtDurUS(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + " s"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'g', 3, 64) + " µs"
}
