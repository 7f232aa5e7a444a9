package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
)

// loadReportHTML is the report's page: one file, no script, charts as
// inline SVG, so that it opens anywhere, offline, and can be mailed.
//
//go:embed loadreport.html
var loadReportHTML string

var loadReportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"ms": func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) + "ms" },
}).Parse(loadReportHTML))

// Chart colours, also checked in the report's screenshot test.
const (
	colBlue   = "#1f77b4"
	colOrange = "#ff7f0e"
	colGreen  = "#2ca02c"
	colRed    = "#d62728"
	colPurple = "#9467bd"
)

// chartLine is one series of a chart.
type chartLine struct {
	Name  string
	Color string
	Y     []float64
}

// chart is a chart of per-second series.
type chart struct {
	Title  string
	YLabel string
	Bars   bool // bars (counts of rare events) instead of lines
	Lines  []chartLine
}

func (r *loadReport) writeHTML(w io.Writer) error {
	col := func(f func(loadSecond) float64) []float64 {
		ys := make([]float64, len(r.Series))
		for i, s := range r.Series {
			ys[i] = f(s)
		}
		return ys
	}
	charts := []chart{
		{Title: "Throughput", YLabel: "acquisitions/s", Lines: []chartLine{
			{"acquisitions/s", colBlue, col(func(s loadSecond) float64 { return float64(s.Acquisitions) })}}},
		{Title: "Wait latency", YLabel: "ms", Lines: []chartLine{
			{"p50", colBlue, col(func(s loadSecond) float64 { return s.WaitP50 })},
			{"p90", colOrange, col(func(s loadSecond) float64 { return s.WaitP90 })},
			{"p99", colRed, col(func(s loadSecond) float64 { return s.WaitP99 })}}},
		{Title: "Hand-off gap", YLabel: "ms", Lines: []chartLine{
			{"p50", colGreen, col(func(s loadSecond) float64 { return s.HandoffP50 })},
			{"p99", colPurple, col(func(s loadSecond) float64 { return s.HandoffP99 })}}},
		{Title: "Renewals", YLabel: "renewals/s", Lines: []chartLine{
			{"renewed", colBlue, col(func(s loadSecond) float64 { return float64(s.Renewals) })},
			{"failed", colRed, col(func(s loadSecond) float64 { return float64(s.RenewalErrors) })}}},
		{Title: "Lost holds and refused writes", YLabel: "per second", Bars: true, Lines: []chartLine{
			{"lost holds", colRed, col(func(s loadSecond) float64 { return float64(s.Lost) })},
			{"fenced writes refused", colOrange, col(func(s loadSecond) float64 { return float64(s.FencedRefused) })}}},
	}
	type chartOut struct {
		Title string
		SVG   template.HTML
	}
	type faultOut struct {
		At    float64
		Kind  string
		W     int
		Token uint64
	}
	start := r.startNanos
	data := struct {
		*loadReport
		Charts       []chartOut
		Faults       []faultOut
		ScenarioJSON string
	}{loadReport: r}
	for _, c := range charts {
		data.Charts = append(data.Charts, chartOut{c.Title, c.svg()})
	}
	for _, f := range r.Summary.Faults {
		k := "SIGSTOP"
		if f.Kind == "kill" {
			k = "SIGKILL"
		}
		data.Faults = append(data.Faults, faultOut{At: float64(f.At-start) / 1e9, Kind: k, W: f.W, Token: f.Token})
	}
	b, _ := json.Marshal(r.Scenario)
	data.ScenarioJSON = string(b)
	return loadReportTmpl.Execute(w, data)
}

// Chart geometry, in pixels.
const (
	chartW, chartH            = 1100, 240
	padL, padR, padT, padB    = 70, 20, 28, 42
	plotW, plotH              = chartW - padL - padR, chartH - padT - padB
	legendItemW, legendSwatch = 170, 14
)

// niceStep is a round step (1, 2 or 5 × 10^k) that cuts span into about n.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func fmtTick(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}

// svg draws the chart: axes with ticks and labels, a legend, one line (or
// a group of bars) per series, one point per second.
func (c chart) svg() template.HTML {
	n := 0
	ymax := 0.0
	for _, l := range c.Lines {
		n = max(n, len(l.Y))
		for _, y := range l.Y {
			ymax = max(ymax, y)
		}
	}
	step := niceStep(ymax, 5)
	top := math.Max(step, math.Ceil(ymax/step)*step)
	xs := func(i float64) float64 { return padL + plotW*i/math.Max(1, float64(n)) }
	ys := func(v float64) float64 { return padT + plotH*(1-v/top) }
	var b strings.Builder
	esc := template.HTMLEscapeString
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartW, chartH, chartW, chartH, esc(c.Title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`, chartW, chartH)
	// Grid and y ticks.
	for v := 0.0; v <= top+step/2; v += step {
		y := ys(v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e3e6ea" stroke-width="1"/>`, padL, y, padL+plotW, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end" fill="#444">%s</text>`, padL-6, y+4, fmtTick(v))
	}
	// x ticks: seconds.
	xstep := int(math.Max(1, niceStep(float64(n), 10)))
	for i := 0; i <= n; i += xstep {
		x := xs(float64(i))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#888" stroke-width="1"/>`, x, padT+plotH, x, padT+plotH+4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11" text-anchor="middle" fill="#444">%d</text>`, x, padT+plotH+16, i)
	}
	// Axes and labels.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333" stroke-width="1.2"/>`, padL, padT, padL, padT+plotH)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333" stroke-width="1.2"/>`, padL, padT+plotH, padL+plotW, padT+plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" text-anchor="middle" fill="#222">time (s)</text>`, padL+plotW/2, chartH-6)
	fmt.Fprintf(&b, `<text x="16" y="%d" font-size="12" text-anchor="middle" fill="#222" transform="rotate(-90 16 %d)">%s</text>`, padT+plotH/2, padT+plotH/2, esc(c.YLabel))
	// Legend, top right.
	for k, l := range c.Lines {
		x := padL + plotW - (len(c.Lines)-k)*legendItemW
		fmt.Fprintf(&b, `<rect x="%d" y="6" width="%d" height="%d" fill="%s"/>`, x, legendSwatch, legendSwatch-4, l.Color)
		fmt.Fprintf(&b, `<text x="%d" y="16" font-size="12" fill="#222">%s</text>`, x+legendSwatch+5, esc(l.Name))
	}
	// Data: a point per second, at the middle of its second.
	if c.Bars {
		slot := plotW / math.Max(1, float64(n))
		bw := math.Max(1, slot*0.8/float64(len(c.Lines)))
		for k, l := range c.Lines {
			for i, v := range l.Y {
				if v <= 0 {
					continue
				}
				x := xs(float64(i)) + slot*0.1 + float64(k)*bw
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %ds: %s</title></rect>`,
					x, ys(v), bw, padT+plotH-ys(v), l.Color, esc(l.Name), i, fmtTick(v))
			}
		}
	} else {
		for _, l := range c.Lines {
			var pts []string
			for i, v := range l.Y {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xs(float64(i)+0.5), ys(v)))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2.5" stroke-linejoin="round" points="%s"/>`, l.Color, strings.Join(pts, " "))
			if n <= 120 {
				for i, v := range l.Y {
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s %ds: %s</title></circle>`, xs(float64(i)+0.5), ys(v), l.Color, esc(l.Name), i, fmtTick(v))
				}
			}
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
