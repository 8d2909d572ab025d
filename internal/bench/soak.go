package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/store"
)

// soakSample is one sampling interval of a soak.
type soakSample struct {
	// Minute is the end of the interval, in minutes since the soak began.
	Minute float64 `json:"minute"`
	// JobsPerSec counts completions; EnqueuedPerSec insertions.
	JobsPerSec     float64 `json:"jobs_per_sec"`
	EnqueuedPerSec float64 `json:"enqueued_per_sec"`
	// Enqueue → handler start of the jobs that started in the interval.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
	// gaffer.jobs at the end of the interval.
	TableMB  float64 `json:"table_mb"`
	IndexMB  float64 `json:"index_mb"`
	LiveRows int64   `json:"live_rows"`
	DeadRows int64   `json:"dead_rows"`
	Vacuums  int64   `json:"vacuums"`
}

// soakResult is a soak's series and its verdict: the last window against
// the first, and the sizes after the first retention period.
type soakResult struct {
	Rate      int           `json:"rate"`
	Capacity  float64       `json:"measured_capacity,omitempty"`
	Retention string        `json:"job_retention"`
	Samples   []soakSample  `json:"samples"`
	First     soakWindow    `json:"first_window"`
	Last      soakWindow    `json:"last_window"`
	Settled   *soakSizeSpan `json:"sizes_after_retention,omitempty"`
}

// soakWindow averages the throughput and p99 of a run of samples.
type soakWindow struct {
	Minutes    float64 `json:"minutes"`
	JobsPerSec float64 `json:"jobs_per_sec"`
	P99        float64 `json:"p99_ms"`
}

// soakSizeSpan is the smallest and largest total size (table plus
// indexes) once the first retention period has passed.
type soakSizeSpan struct {
	FromMinute float64 `json:"from_minute"`
	MinMB      float64 `json:"min_mb"`
	MaxMB      float64 `json:"max_mb"`
}

// shareOfCapacity measures capacity with a 30-second bench continuous and
// returns it with the rate that is share of it.
func shareOfCapacity(ctx context.Context, st *store.Store, o Options, share float64) (float64, int, error) {
	probe := o
	probe.Duration = 30 * time.Second
	var pr Result
	if err := benchContinuous(ctx, st, probe, &pr); err != nil {
		return 0, 0, fmt.Errorf("measure capacity: %w", err)
	}
	if _, err := st.DeleteQueueJobs(ctx, Queue); err != nil {
		return 0, 0, err
	}
	rate := int(pr.JobsPerSec * share)
	fmt.Fprintf(os.Stderr, "capacity %.0f jobs/s; the load runs at %.0f%%: %d jobs/s\n", pr.JobsPerSec, share*100, rate)
	return pr.JobsPerSec, rate, nil
}

// benchSoak enqueues at a steady --rate (or 80% of a capacity it first
// measures) for --duration while one node works the jobs and deletes
// finished ones after --retention, and samples throughput, enqueue →
// start latency and the job table's size every --sample.
func benchSoak(ctx context.Context, st *store.Store, o Options, r *Result) error {
	soak := &soakResult{Rate: o.Rate, Retention: o.Retention.String()}
	r.Soak = soak
	if !o.RateSet {
		var err error
		if soak.Capacity, soak.Rate, err = shareOfCapacity(ctx, st, o, 0.8); err != nil {
			return err
		}
	}
	if err := st.VacuumJobs(ctx); err != nil {
		return err
	}
	l, err := startLoad(ctx, st, o, o.URL, soak.Rate, o.Sample)
	if err != nil {
		return err
	}
	defer l.stop()
	cpu := startCPU()
	tick := time.NewTicker(o.Sample)
	defer tick.Stop()
	for i := 0; time.Duration(i)*o.Sample < o.Duration; i++ {
		if err := l.wait(ctx, tick.C); err != nil {
			return err
		}
		s, _, err := l.sample(ctx, st, i)
		if err != nil {
			return err
		}
		soak.Samples = append(soak.Samples, s)
		fmt.Fprintf(os.Stderr, "%6.1f min  %7.0f jobs/s (enqueued %7.0f)  p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms  table %7.1f MB  indexes %7.1f MB  rows %d live %d dead  vacuums %d\n",
			s.Minute, s.JobsPerSec, s.EnqueuedPerSec, s.P50, s.P99, s.Max, s.TableMB, s.IndexMB, s.LiveRows, s.DeadRows, s.Vacuums)
	}
	l.stopGen()
	cpu.stop(r)
	r.Seconds = o.Duration.Seconds()
	r.Jobs = int(l.lastDone)
	r.JobsPerSec = l.lastDone / r.Seconds
	r.Concurrency, r.ClaimBatch = o.Concurrency, o.ClaimBatch
	soak.summarize(o.Retention)
	return nil
}

// summarize compares the first and last five minutes (or fifths of a
// shorter run) and spans the sizes after the first retention period plus
// one sweep interval, when the run lasted that long.
func (s *soakResult) summarize(retention time.Duration) {
	n := len(s.Samples)
	if n == 0 {
		return
	}
	step := s.Samples[0].Minute
	w := max(1, min(int(5/step), n/5))
	window := func(ss []soakSample) soakWindow {
		var sw soakWindow
		for _, x := range ss {
			sw.JobsPerSec += x.JobsPerSec / float64(len(ss))
			sw.P99 += x.P99 / float64(len(ss))
		}
		sw.Minutes = float64(len(ss)) * step
		return sw
	}
	s.First, s.Last = window(s.Samples[:w]), window(s.Samples[n-w:])
	from := retention.Minutes() + 1 // + the sweep interval
	for _, x := range s.Samples {
		if x.Minute < from+step {
			continue
		}
		mb := x.TableMB + x.IndexMB
		if s.Settled == nil {
			s.Settled = &soakSizeSpan{FromMinute: x.Minute, MinMB: mb, MaxMB: mb}
		}
		s.Settled.MinMB, s.Settled.MaxMB = min(s.Settled.MinMB, mb), max(s.Settled.MaxMB, mb)
	}
}

func printSoak(w io.Writer, r Result) {
	s := r.Soak
	fmt.Fprintf(w, "soak at %d jobs/s for %.0fs, finished jobs deleted after %s\n", s.Rate, r.Seconds, s.Retention)
	fmt.Fprintln(w, "minute  jobs/s   enqueue→start p99   table+indexes")
	for _, x := range s.Samples {
		fmt.Fprintf(w, "%6.1f  %7.0f  %10.1f ms   %7.1f + %7.1f MB\n", x.Minute, x.JobsPerSec, x.P99, x.TableMB, x.IndexMB)
	}
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return (a/b - 1) * 100
	}
	fmt.Fprintf(w, "first %.0f min: %.0f jobs/s, p99 %.1f ms; last %.0f min: %.0f jobs/s (%+.1f%%), p99 %.1f ms (%+.1f%%)\n",
		s.First.Minutes, s.First.JobsPerSec, s.First.P99, s.Last.Minutes, s.Last.JobsPerSec, ratio(s.Last.JobsPerSec, s.First.JobsPerSec),
		s.Last.P99, ratio(s.Last.P99, s.First.P99))
	if s.Settled != nil {
		fmt.Fprintf(w, "table+indexes from minute %.0f: %.0f–%.0f MB (spread %.1f%%)\n", s.Settled.FromMinute, s.Settled.MinMB, s.Settled.MaxMB,
			ratio(s.Settled.MaxMB, s.Settled.MinMB))
	}
	if misses := soakVerdict(s, 0.10); len(misses) > 0 {
		fmt.Fprintf(w, "goal missed (last window within 10%% of the first): %s\n", strings.Join(misses, "; "))
	} else {
		fmt.Fprintln(w, "goal met: the last window's throughput and p99 are within 10% of the first's")
	}
}

// soakVerdict says whether the soak met its goal: the last window's
// throughput and p99 within tolerance of the first's, either way.
func soakVerdict(s *soakResult, tolerance float64) []string {
	var misses []string
	off := func(a, b float64) bool { return b > 0 && math.Abs(a/b-1) > tolerance }
	if off(s.Last.JobsPerSec, s.First.JobsPerSec) {
		misses = append(misses, fmt.Sprintf("throughput went from %.0f to %.0f jobs/s", s.First.JobsPerSec, s.Last.JobsPerSec))
	}
	if off(s.Last.P99, s.First.P99) {
		misses = append(misses, fmt.Sprintf("p99 went from %.1f to %.1f ms", s.First.P99, s.Last.P99))
	}
	return misses
}
