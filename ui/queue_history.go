package ui

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/job"
)

// A queue's page plots what finished in it — completed and failed jobs —
// over a range the user picks. The leader's samples keep a week of
// per-minute counts per queue and tenant (gaffer.queue_throughput); a
// range reads its minutes through the table's primary key and sums them
// into buckets that grow with it, so every chart has 60 to 96 points
// however long the range.

// historyRange is one choice of the range picker.
type historyRange struct {
	Name   string
	Window time.Duration
	Bucket time.Duration
	// Tick is the gap between the x axis's labels.
	Tick time.Duration
}

var historyRanges = []historyRange{
	{"1h", time.Hour, time.Minute, 15 * time.Minute},
	{"6h", 6 * time.Hour, 5 * time.Minute, time.Hour},
	{"24h", 24 * time.Hour, 15 * time.Minute, 6 * time.Hour},
	{"7d", 7 * 24 * time.Hour, 2 * time.Hour, 24 * time.Hour},
}

func pickRange(name string) (historyRange, error) {
	if name == "" {
		return historyRanges[0], nil
	}
	names := make([]string, len(historyRanges))
	for i, r := range historyRanges {
		if r.Name == name {
			return r, nil
		}
		names[i] = r.Name
	}
	return historyRange{}, badInput("range must be one of %s; got %s", strings.Join(names, ", "), quoteBounded(name))
}

type queueHistoryData struct {
	Queue  string
	Range  historyRange
	Ranges []historyRange
	Chart  chart
	// Completed and Failed are the range's totals; FailedPct Failed's
	// share of both.
	Completed, Failed int64
	FailedPct         string
}

func (h *Handler) queueHistoryPage(r *http.Request, v *view) error {
	queue := r.PathValue("queue")
	rg, err := pickRange(r.URL.Query().Get("range"))
	if err != nil {
		return err
	}
	v.Title = "Queue " + queue
	buckets, err := h.cfg.Jobs.QueueHistory(r.Context(), v.P.ReadTenant(v.Tenant), queue, rg.Window, rg.Bucket)
	if err != nil {
		return err
	}
	d := queueHistoryData{Queue: queue, Range: rg, Ranges: historyRanges, Chart: historyChart(buckets, v.Now, rg)}
	for _, b := range buckets {
		d.Completed += b.Completed
		d.Failed += b.Failed
	}
	if n := d.Completed + d.Failed; n > 0 {
		d.FailedPct = fmt.Sprintf("%.1f%%", 100*float64(d.Failed)/float64(n))
	}
	v.Data = d
	return nil
}

// historyChart plots buckets' rates (jobs per second, averaged over each
// bucket) over rg's window ending at now; a bucket absent had nothing
// finish, and is plotted at zero.
func historyChart(buckets []job.QueueBucket, now time.Time, rg historyRange) chart {
	c := chart{Width: 720, Height: 200, Left: 56, Top: 10, Right: 710, Bottom: 176, Empty: len(buckets) == 0}
	start := now.Add(-rg.Window)
	x := func(t time.Time) int {
		f := float64(t.Sub(start)) / float64(rg.Window)
		return c.Left + int(math.Round(math.Min(math.Max(f, 0), 1)*float64(c.Right-c.Left)))
	}
	for i := 0; ; i++ {
		t := now.Add(-rg.Window + time.Duration(i)*rg.Tick)
		if t.After(now) {
			break
		}
		label := "now"
		if ago := now.Sub(t); ago > 0 {
			label = "-" + shortDur(ago)
		}
		c.XTicks = append(c.XTicks, tick{X: x(t), Y: c.Bottom + 16, Label: label})
	}
	if c.Empty {
		return c
	}
	secs := rg.Bucket.Seconds()
	have := map[int64]job.QueueBucket{}
	top := 0.0
	for _, b := range buckets {
		have[b.At.Unix()] = b
		top = math.Max(top, float64(max(b.Completed, b.Failed))/secs)
	}
	top, step := niceScale(top)
	y := func(v float64) int { return c.Bottom - int(math.Round(v/top*float64(c.Bottom-c.Top))) }
	var done, failed strings.Builder
	for at := start.Truncate(rg.Bucket); !at.After(now); at = at.Add(rg.Bucket) {
		b := have[at.Unix()]
		mid := at.Add(rg.Bucket / 2)
		if mid.Before(start) {
			continue
		}
		pt := chartPoint{X: x(mid), Completed: y(float64(b.Completed) / secs), Failed: y(float64(b.Failed) / secs)}
		if b.Completed+b.Failed > 0 {
			c.Points = append(c.Points, pt)
			c.Latest = job.ThroughputPoint{Minute: b.At, CompletedPerSec: float64(b.Completed) / secs, FailedPerSec: float64(b.Failed) / secs}
		}
		fmt.Fprintf(&done, "%d,%d ", pt.X, pt.Completed)
		fmt.Fprintf(&failed, "%d,%d ", pt.X, pt.Failed)
	}
	c.Completed, c.Failed = strings.TrimSpace(done.String()), strings.TrimSpace(failed.String())
	for i := 0; float64(i)*step <= top*1.0001; i++ {
		v := float64(i) * step
		c.YTicks = append(c.YTicks, tick{X: c.Left - 6, Y: y(v), Label: rate(v)})
	}
	return c
}

// shortDur is d in its largest whole unit: 45m, 5h, 6d.
func shortDur(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dm", d/time.Minute)
}
