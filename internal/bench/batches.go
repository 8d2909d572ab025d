package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// batchCallbackKind is the kind of bench batches' callbacks.
const batchCallbackKind = "bench.batch_done"

// batchResult is bench batches' result.
type batchResult struct {
	Batches   int `json:"batches"`
	BatchSize int `json:"batch_size"`
	// Lag is, per batch, its last job's final state to its callback's
	// start (database clock), in ms.
	Lag *latencies `json:"lag"`
	// Callbacks is how many callback jobs were enqueued: one a batch.
	Callbacks int `json:"callbacks"`
}

// benchBatches enqueues o.Batches batches of o.BatchSize no-op jobs (each
// opened, filled in calls of o.Batch jobs, and closed), then times one
// node working them off: the jobs' throughput, and per batch the time
// from its last job's completion to its callback's start. The jobs run at
// priority 1 and the callbacks at 0, so that the lag is the callback's
// own (its enqueue, claim and start), not the backlog's.
func benchBatches(ctx context.Context, st *store.Store, o Options, r *Result) error {
	client := job.NewClient(st.Pool(), nil)
	enqStart := time.Now()
	for range o.Batches {
		b, err := client.OpenBatch(ctx, job.BatchRequest{Kind: batchCallbackKind, Queue: Queue})
		if err != nil {
			return err
		}
		reqs := make([]job.Request, min(o.Batch, o.BatchSize))
		for i := range reqs {
			// Priority 1 against the callbacks' 0: a callback runs next,
			// not behind the jobs of the batches after its own.
			reqs[i] = job.Request{Kind: "noop", Queue: Queue, Priority: 1, Args: json.RawMessage(`{}`), Batch: b.ID}
		}
		for left := o.BatchSize; left > 0; left -= len(reqs) {
			if _, err := client.EnqueueMany(ctx, reqs[:min(left, len(reqs))]); err != nil {
				return err
			}
		}
		if _, err := client.CloseBatch(ctx, b.Tenant, b.ID); err != nil {
			return err
		}
	}
	jobs := o.Batches * o.BatchSize
	r.Jobs = jobs
	r.EnqueuePerSec = float64(jobs) / time.Since(enqStart).Seconds()
	reg := prometheus.NewRegistry()
	node, err := benchNode(ctx, o.URL, o, reg, func(n *gaffer.Node) {
		n.Registry().HandleFunc(batchCallbackKind, func(context.Context, *job.Job) error { return nil })
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
	if err := waitCompleted(ctx, reg, float64(jobs+o.Batches)); err != nil {
		return err
	}
	r.Seconds = time.Since(start).Seconds()
	r.JobsPerSec = float64(jobs) / r.Seconds
	r.Concurrency, r.ClaimBatch = o.Concurrency, o.ClaimBatch
	cpu.stop(r)
	lags, err := st.BatchCallbackLags(ctx, batchCallbackKind)
	if err != nil {
		return err
	}
	r.Batch = &batchResult{Batches: o.Batches, BatchSize: o.BatchSize, Callbacks: len(lags), Lag: percentiles(lags)}
	if len(lags) != o.Batches {
		return fmt.Errorf("%d batches, %d callbacks started", o.Batches, len(lags))
	}
	return nil
}

func printBatches(w io.Writer, r Result) {
	b := r.Batch
	fmt.Fprintf(w, "enqueue: %d batches of %d jobs at %.0f jobs/s\n", b.Batches, b.BatchSize, r.EnqueuePerSec)
	fmt.Fprintf(w, "work: %d jobs and %d callbacks in %.2fs = %.0f jobs/s (concurrency %d, claim batch %d)\n",
		r.Jobs, b.Callbacks, r.Seconds, r.JobsPerSec, r.Concurrency, r.ClaimBatch)
	fmt.Fprintf(w, "last job completed → callback started, %d batches: p50 %.2fms  p95 %.2fms  p99 %.2fms  max %.2fms\n",
		b.Lag.N, b.Lag.P50, b.Lag.P95, b.Lag.P99, b.Lag.Max)
}
