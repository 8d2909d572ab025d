package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// writeSoakSVG draws a soak's three series — throughput, enqueue → start
// p99, and table plus index size — as three stacked panels sharing the
// time axis, with the first retention period marked. Plain SVG, no
// scripts, so that it renders on GitHub and in any browser.
func writeSoakSVG(w io.Writer, s *soakResult, retentionMin float64) error {
	const (
		width, panelH, top, left, right, gap = 760, 170, 40, 70, 20, 40
	)
	type line struct {
		name, color string
		y           func(soakSample) float64
	}
	panels := []struct {
		title, unit string
		log         bool // a logarithmic axis: latency spans milliseconds to seconds
		lines       []line
	}{
		{"throughput", "jobs/s", false, []line{
			{"completed", "#1f77b4", func(x soakSample) float64 { return x.JobsPerSec }},
			{"enqueued", "#aec7e8", func(x soakSample) float64 { return x.EnqueuedPerSec }},
		}},
		{"enqueue → handler start", "ms, log scale", true, []line{
			{"p99", "#d62728", func(x soakSample) float64 { return x.P99 }},
			{"p50", "#ff9896", func(x soakSample) float64 { return x.P50 }},
		}},
		{"gaffer.jobs on disk", "MB", false, []line{
			{"table + indexes", "#2ca02c", func(x soakSample) float64 { return x.TableMB + x.IndexMB }},
			{"table", "#98df8a", func(x soakSample) float64 { return x.TableMB }},
			{"indexes", "#9467bd", func(x soakSample) float64 { return x.IndexMB }},
		}},
	}
	height := top + len(panels)*(panelH+gap) + 10
	plotW := float64(width - left - right)
	xMax := 1.0
	if n := len(s.Samples); n > 0 {
		xMax = s.Samples[n-1].Minute
	}
	xOf := func(min float64) float64 { return float64(left) + min/xMax*plotW }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14">gaffer bench soak: %d jobs/s, finished jobs deleted after %s</text>`+"\n", left, s.Rate, s.Retention)
	for pi, p := range panels {
		y0 := float64(top + pi*(panelH+gap))
		yMax := 0.0
		for _, l := range p.lines {
			for _, x := range s.Samples {
				yMax = math.Max(yMax, l.y(x))
			}
		}
		yMax = niceCeil(yMax * 1.1)
		yOf := func(v float64) float64 { return y0 + panelH - v/yMax*panelH }
		ticks := []float64{0, yMax / 4, yMax / 2, yMax * 3 / 4, yMax}
		if p.log {
			// Decades from 1 up to the first power of ten above the data.
			lo, hi := 0.0, math.Max(1, math.Ceil(math.Log10(math.Max(yMax, 10))))
			yOf = func(v float64) float64 {
				return y0 + panelH - (math.Log10(math.Max(v, 1))-lo)/(hi-lo)*panelH
			}
			ticks = ticks[:0]
			for d := lo; d <= hi; d++ {
				ticks = append(ticks, math.Pow(10, d))
			}
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold">%s (%s)</text>`+"\n", left, y0-6, p.title, p.unit)
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.0f" height="%d" fill="none" stroke="#999"/>`+"\n", left, y0, plotW, panelH)
		for _, v := range ticks {
			fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/>`, left, float64(left)+plotW, yOf(v), yOf(v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, yOf(v)+4, shortNum(v))
		}
		if retentionMin > 0 && retentionMin < xMax {
			x := xOf(retentionMin)
			fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#888" stroke-dasharray="4 3"/>`+"\n", x, x, y0, y0+panelH)
			if pi == 0 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="#555">first deletes</text>`+"\n", x+4, y0+14)
			}
		}
		for li, l := range p.lines {
			var pts []string
			for _, x := range s.Samples {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(x.Minute), yOf(l.y(x))))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", l.color, strings.Join(pts, " "))
			lx := float64(left) + plotW - 130
			ly := y0 + 18 + float64(li)*16
			fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="2"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
				lx, lx+18, ly-4, ly-4, l.color, lx+24, ly, l.name)
		}
		for k := 0; k <= 6; k++ {
			m := xMax * float64(k) / 6
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`, xOf(m), y0+panelH+14, shortNum(m))
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" fill="#555">minutes</text>`+"\n", float64(left)+plotW, y0+panelH+28)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// Replot redraws a soak's plot into the SVG file svg from from, its
// result as JSON (bench soak --json), and prints its summary to w.
func Replot(w io.Writer, from, svg string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil || r.Soak == nil {
		return fmt.Errorf("%s holds no soak result (bench soak --json): %v", from, err)
	}
	retention, err := time.ParseDuration(r.Soak.Retention)
	if err != nil {
		return fmt.Errorf("%s: job_retention: %w", from, err)
	}
	f, err := os.Create(svg)
	if err != nil {
		return err
	}
	if err := writeSoakSVG(f, r.Soak, retention.Minutes()+1); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	printSoak(w, r)
	return nil
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func shortNum(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.3gk", v/1000)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}
