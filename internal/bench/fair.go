package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// fairResult is what the fairness and limits modes measure.
type fairResult struct {
	// Fairness: tenant a's backlog drained at BacklogPerSec while tenant b
	// enqueued at Rate; b's enqueue→start latency. AlonePerSec is the
	// same backlog worked off with no other tenant (bench backlog), in the
	// same run.
	BacklogPerSec float64    `json:"backlog_jobs_per_sec,omitempty"`
	AlonePerSec   float64    `json:"alone_jobs_per_sec,omitempty"`
	Rate          int        `json:"rate,omitempty"`
	Other         *latencies `json:"other_tenant_latency,omitempty"`
	// Limits: jobs/s with no limit, with one that does not bind, and with
	// one that binds (Limit running at once, jobs of HoldMS each: capacity
	// Limit*1000/HoldMS jobs/s), and the most seen running under it.
	NoLimitPerSec  float64 `json:"no_limit_jobs_per_sec,omitempty"`
	LooseLimitRate float64 `json:"loose_limit_jobs_per_sec,omitempty"`
	TightLimitRate float64 `json:"tight_limit_jobs_per_sec,omitempty"`
	Limit          int     `json:"limit,omitempty"`
	HoldMS         int     `json:"hold_ms,omitempty"`
	Capacity       float64 `json:"tight_limit_capacity_jobs_per_sec,omitempty"`
	PeakRunning    int64   `json:"tight_limit_peak_running,omitempty"`
}

// benchFairness: tenant a has a --jobs backlog in the queue; tenant b
// enqueues --rate jobs a second into the same queue while one node works
// it. Reports a's drain rate and b's enqueue→start latency, beside the
// rate at which the same backlog drains with no other tenant (what bench
// backlog measures), measured first in the same run: on a shared machine
// only a same-run ratio means much.
func benchFairness(ctx context.Context, st *store.Store, o Options, r *Result) error {
	var alone Result
	if err := benchBacklog(ctx, st, o, &alone); err != nil {
		return err
	}
	if _, err := st.DeleteQueueJobs(ctx, Queue); err != nil {
		return err
	}
	if err := st.VacuumJobs(ctx); err != nil {
		return err
	}
	client := job.NewClient(st.Pool(), nil)
	reqs := make([]job.Request, min(o.Batch, o.Jobs))
	for i := range reqs {
		reqs[i] = job.Request{Kind: "bench.a", Tenant: "a", Queue: Queue, Args: json.RawMessage(`{}`)}
	}
	for left := o.Jobs; left > 0; left -= o.Batch {
		if _, err := client.EnqueueMany(ctx, reqs[:min(left, o.Batch)]); err != nil {
			return err
		}
	}
	var mu sync.Mutex
	started := map[int64]time.Time{}
	var aDone atomic.Int64
	node, err := benchNode(ctx, o.URL, o, nil, func(n *gaffer.Node) {
		n.HandleFunc("bench.a", func(ctx context.Context, j *job.Job) error {
			aDone.Add(1)
			return nil
		})
		n.HandleFunc("bench.b", func(ctx context.Context, j *job.Job) error {
			now := time.Now()
			mu.Lock()
			started[j.ID] = now
			mu.Unlock()
			return nil
		})
	})
	if err != nil {
		return err
	}
	cpu := startCPU()
	start := time.Now()
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer node.Stop(context.Background())
	enqueued := map[int64]time.Time{}
	tick := time.NewTicker(time.Second / time.Duration(o.Rate))
	defer tick.Stop()
	for aDone.Load() < int64(o.Jobs) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		t0 := time.Now()
		res, err := client.Enqueue(ctx, job.Request{Kind: "bench.b", Tenant: "b", Queue: Queue})
		if err != nil {
			return err
		}
		enqueued[res.Job.ID] = t0
	}
	drained := time.Since(start)
	cpu.stop(r)
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	var ms []float64
	for id, t0 := range enqueued {
		if t1, ok := started[id]; ok {
			ms = append(ms, float64(t1.Sub(t0).Microseconds())/1000)
		}
	}
	if len(ms) < len(enqueued) {
		return fmt.Errorf("%d of tenant b's %d jobs did not start", len(enqueued)-len(ms), len(enqueued))
	}
	r.Jobs, r.Seconds = o.Jobs, drained.Seconds()
	r.JobsPerSec = float64(o.Jobs) / drained.Seconds()
	r.Fair = &fairResult{BacklogPerSec: r.JobsPerSec, AlonePerSec: alone.JobsPerSec, Rate: o.Rate, Other: percentiles(ms)}
	r.Concurrency, r.ClaimBatch = o.Concurrency, o.ClaimBatch
	return nil
}

// benchLimits works off a --jobs backlog three times: with no limit, with
// a limit on the queue that does not bind, and with one that binds
// (--limit running at once, jobs holding --hold each).
func benchLimits(ctx context.Context, st *store.Store, o Options, r *Result) error {
	client := job.NewClient(st.Pool(), nil)
	var running, peak atomic.Int64
	hold := o.Hold
	work := func(ctx context.Context, j *job.Job) error {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if hold > 0 {
			time.Sleep(hold)
		}
		running.Add(-1)
		return nil
	}
	round := func(jobs int, limit *job.Limit) (float64, error) {
		if _, err := st.DeleteQueueJobs(ctx, Queue); err != nil {
			return 0, err
		}
		// Each round starts without the dead rows of the one before.
		if err := st.VacuumJobs(ctx); err != nil {
			return 0, err
		}
		if limit != nil {
			if _, err := client.SetLimit(ctx, *limit); err != nil {
				return 0, err
			}
			defer client.DeleteLimit(context.WithoutCancel(ctx), limit.Name)
		}
		reqs := make([]job.Request, min(o.Batch, jobs))
		for i := range reqs {
			reqs[i] = job.Request{Kind: "bench.limited", Queue: Queue, Args: json.RawMessage(`{}`)}
		}
		for left := jobs; left > 0; left -= o.Batch {
			if _, err := client.EnqueueMany(ctx, reqs[:min(left, o.Batch)]); err != nil {
				return 0, err
			}
		}
		var done atomic.Int64
		node, err := benchNode(ctx, o.URL, o, nil, func(n *gaffer.Node) {
			n.HandleFunc("bench.limited", func(ctx context.Context, j *job.Job) error {
				defer done.Add(1)
				return work(ctx, j)
			})
		})
		if err != nil {
			return 0, err
		}
		start := time.Now()
		if err := node.Start(ctx); err != nil {
			return 0, err
		}
		defer node.Stop(context.Background())
		for done.Load() < int64(jobs) {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			time.Sleep(5 * time.Millisecond)
		}
		return float64(jobs) / time.Since(start).Seconds(), nil
	}
	f := &fairResult{Limit: o.Limit, HoldMS: int(o.Hold.Milliseconds())}
	hold = 0
	// A first round warms the server up (plans, caches, statistics); its
	// figure is not kept.
	if _, err := round(min(o.Jobs, 50000), nil); err != nil {
		return err
	}
	cpu := startCPU()
	var err error
	if f.NoLimitPerSec, err = round(o.Jobs, nil); err != nil {
		return err
	}
	if f.LooseLimitRate, err = round(o.Jobs, &job.Limit{Name: "bench-loose", Queue: Queue, Concurrency: 10 * o.Concurrency}); err != nil {
		return err
	}
	hold = o.Hold
	peak.Store(0)
	f.Capacity = float64(o.Limit) / o.Hold.Seconds()
	tightJobs := min(o.Jobs, int(f.Capacity*10)) // about ten seconds' worth
	if f.TightLimitRate, err = round(tightJobs, &job.Limit{Name: "bench-tight", Queue: Queue, Concurrency: o.Limit}); err != nil {
		return err
	}
	f.PeakRunning = peak.Load()
	cpu.stop(r)
	r.Jobs, r.Fair = o.Jobs, f
	r.Concurrency, r.ClaimBatch = o.Concurrency, o.ClaimBatch
	if f.PeakRunning > int64(o.Limit) {
		return fmt.Errorf("%d jobs ran at once under a limit of %d", f.PeakRunning, o.Limit)
	}
	return nil
}

func printFair(w io.Writer, r Result) {
	f := r.Fair
	switch r.Mode {
	case "fairness":
		fmt.Fprintf(w, "tenant a's backlog of %d jobs alone (bench backlog): %.0f jobs/s (concurrency %d, claim batch %d)\n",
			r.Jobs, f.AlonePerSec, r.Concurrency, r.ClaimBatch)
		fmt.Fprintf(w, "tenant a's backlog of %d jobs drained at %.0f jobs/s (%.1f%% of alone) while tenant b enqueued %d jobs/s into the same queue\n",
			r.Jobs, f.BacklogPerSec, 100*f.BacklogPerSec/f.AlonePerSec, f.Rate)
		fmt.Fprintf(w, "tenant b enqueue → start, %d jobs: p50 %.2fms  p95 %.2fms  p99 %.2fms  max %.2fms\n",
			f.Other.N, f.Other.P50, f.Other.P95, f.Other.P99, f.Other.Max)
	case "limits":
		fmt.Fprintf(w, "no limit:                 %.0f jobs/s\n", f.NoLimitPerSec)
		fmt.Fprintf(w, "limit that does not bind: %.0f jobs/s (%.1f%% of no limit)\n", f.LooseLimitRate, 100*f.LooseLimitRate/f.NoLimitPerSec)
		fmt.Fprintf(w, "limit of %d, jobs of %dms: %.0f jobs/s of a %.0f capacity (%.1f%%); at most %d running\n",
			f.Limit, f.HoldMS, f.TightLimitRate, f.Capacity, 100*f.TightLimitRate/f.Capacity, f.PeakRunning)
	}
}
