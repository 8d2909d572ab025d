package ui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/job"
)

// chart is the overview's throughput plot, drawn as SVG by the server.
type chart struct {
	Width, Height int
	// Left, Top, Right, Bottom bound the plotting area.
	Left, Top, Right, Bottom int
	Completed, Failed        string // polyline points
	// Points mark each minute, so a lone sample still shows.
	Points         []chartPoint
	YTicks, XTicks []tick
	Latest         job.ThroughputPoint
	Empty          bool
}

type chartPoint struct{ X, Completed, Failed int }

type tick struct {
	X, Y  int
	Label string
}

// throughputChart plots the last hour's per-minute rates ending at now.
func throughputChart(series []job.ThroughputPoint, now time.Time) chart {
	c := chart{Width: 720, Height: 200, Left: 56, Top: 10, Right: 710, Bottom: 176, Empty: len(series) == 0}
	if c.Empty {
		return c
	}
	c.Latest = series[len(series)-1]
	top := 0.0
	for _, p := range series {
		top = math.Max(top, math.Max(p.CompletedPerSec, p.FailedPerSec))
	}
	top, step := niceScale(top)
	start := now.Add(-time.Hour)
	x := func(t time.Time) int {
		f := float64(t.Sub(start)) / float64(time.Hour)
		return c.Left + int(math.Round(math.Min(math.Max(f, 0), 1)*float64(c.Right-c.Left)))
	}
	y := func(v float64) int {
		return c.Bottom - int(math.Round(v/top*float64(c.Bottom-c.Top)))
	}
	var done, failed strings.Builder
	for _, p := range series {
		// A minute's rate is plotted at the minute's middle.
		px := x(p.Minute.Add(30 * time.Second))
		pt := chartPoint{X: px, Completed: y(p.CompletedPerSec), Failed: y(p.FailedPerSec)}
		c.Points = append(c.Points, pt)
		fmt.Fprintf(&done, "%d,%d ", pt.X, pt.Completed)
		fmt.Fprintf(&failed, "%d,%d ", pt.X, pt.Failed)
	}
	c.Completed, c.Failed = strings.TrimSpace(done.String()), strings.TrimSpace(failed.String())
	for i := 0; float64(i)*step <= top*1.0001; i++ {
		v := float64(i) * step
		c.YTicks = append(c.YTicks, tick{X: c.Left - 6, Y: y(v), Label: rate(v)})
	}
	for m := 0; m <= 60; m += 15 {
		t := start.Add(time.Duration(m) * time.Minute)
		label := fmt.Sprintf("-%dm", 60-m)
		if m == 60 {
			label = "now"
		}
		c.XTicks = append(c.XTicks, tick{X: x(t), Y: c.Bottom + 16, Label: label})
	}
	return c
}

// niceScale picks the y axis for values up to max: the smallest step of
// 1, 2, 2.5 or 5 times a power of ten that needs at most five gridlines
// to reach max, and the top as the first gridline at or above it.
func niceScale(max float64) (top, step float64) {
	if max <= 0 {
		max = 1
	}
	p := math.Pow(10, math.Floor(math.Log10(max/5)))
	for _, scale := range []float64{p, 10 * p, 100 * p} {
		for _, m := range []float64{1, 2, 2.5, 5} {
			step = m * scale
			if n := math.Ceil(max/step - 1e-9); n <= 5 {
				return n * step, step
			}
		}
	}
	return math.Ceil(max/step) * step, step
}

// rate formats jobs per second compactly.
func rate(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.1fk/s", v/1000)
	case v >= 10:
		return fmt.Sprintf("%.0f/s", v)
	default:
		return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) + "/s"
	}
}
