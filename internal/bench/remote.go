package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/internal/workclient"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// remoteResult is what bench remote measures besides jobs/s.
type remoteResult struct {
	Workers int `json:"workers"`
	// Batch is the most jobs one claim takes (and so one completion call
	// carries).
	Batch int `json:"batch"`
	// Calls are the HTTP calls the workers made working the backlog.
	Calls int64 `json:"calls"`
	// Latency: enqueue (one job at a time at Rate) → the claim that
	// took it answered in the worker, while the workers long-poll.
	Rate    int        `json:"rate"`
	Latency *latencies `json:"latency"`
}

// benchRemote measures remote workers over HTTP on this machine: a node
// serving the API on loopback (its own worker works another queue), and
// --workers goroutines, each a registered remote worker using only HTTP
// (internal/workclient), claiming up to --claim-batch jobs at once and
// completing them in one call. First they long-poll while one job at a
// time is enqueued at --rate for --duration (enqueue → claim answered in
// the worker); then they work off a --jobs backlog (jobs/s, from the
// first claim until every completion is accepted).
func benchRemote(ctx context.Context, st *store.Store, o Options, r *Result) error {
	reg := prometheus.NewRegistry()
	node, err := gaffer.NewNode(ctx, gaffer.Config{DatabaseURL: o.URL, ID: "bench", Queues: map[string]int{"bench-idle": 1}, MaxConns: 8,
		Registerer: reg, Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn})})
	if err != nil {
		return err
	}
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer node.Stop(context.Background())
	tokens := auth.NewTokens(node.Pool())
	token, _, err := tokens.Create(ctx, auth.NewTokenRequest{Name: "bench remote", Scopes: []string{auth.ScopeWorker}})
	if err != nil {
		return err
	}
	a, err := api.New(api.Config{Pool: node.Pool(), Tokens: tokens, Jobs: node.Client(), DLQ: node.DLQ(), Cron: node.Cron(), Workflows: node.Workflows(),
		Remote: node.RemoteWorkers(), RateLimit: 1e6, RateBurst: 1e6})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a}
	go srv.Serve(ln)
	defer srv.Close()
	defer node.RemoteWorkers().EndWaits()
	batch := min(o.ClaimBatch, 1000)
	transport := &http.Transport{MaxIdleConnsPerHost: o.Workers + 1}
	client := &workclient.Client{URL: "http://" + ln.Addr().String(), Token: token, HTTP: &http.Client{Transport: transport}}
	rr := &remoteResult{Workers: o.Workers, Batch: batch, Rate: o.Rate}
	r.Remote = rr

	var calls, done atomic.Int64
	work := func(ctx context.Context, id string, wait time.Duration, claimed func([]workclient.Job)) error {
		for ctx.Err() == nil {
			res, err := client.Claim(ctx, id, batch, wait)
			calls.Add(1)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("claim: %w", err)
			}
			if len(res.Jobs) == 0 {
				continue
			}
			if claimed != nil {
				claimed(res.Jobs)
			}
			cs := make([]workclient.Completion, len(res.Jobs))
			for i, j := range res.Jobs {
				cs[i] = workclient.Completion{Lease: j.Lease}
			}
			outs, err := client.Complete(context.WithoutCancel(ctx), cs)
			calls.Add(1)
			if err != nil {
				return fmt.Errorf("complete: %w", err)
			}
			for _, out := range outs {
				if out.Status != "ok" {
					return fmt.Errorf("complete job %d: %s", out.ID, out.Status)
				}
			}
			done.Add(int64(len(outs)))
		}
		return nil
	}
	ids := make([]string, o.Workers)
	for i := range ids {
		w, err := client.Register(ctx, workclient.Registration{Name: fmt.Sprintf("bench-%d", i), Queues: []string{Queue}, Kinds: []string{"noop", "bench.mark"}})
		if err != nil {
			return err
		}
		ids[i] = w.ID
	}
	run := func(wait time.Duration, claimed func([]workclient.Job)) (stop func() error) {
		wctx, cancel := context.WithCancel(ctx)
		errs := make(chan error, len(ids))
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- work(wctx, id, wait, claimed)
			}()
		}
		return func() error {
			cancel()
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		}
	}
	// Latency first, on an empty queue (a drained backlog leaves dead
	// index entries that every claim walks until vacuum removes them):
	// the workers long-poll; one job at a time.
	var mu sync.Mutex
	started := map[int64]time.Time{}
	stop := run(20*time.Second, func(jobs []workclient.Job) {
		now := time.Now()
		mu.Lock()
		for _, j := range jobs {
			started[j.ID] = now
		}
		mu.Unlock()
	})
	time.Sleep(500 * time.Millisecond) // every worker waiting
	jc := job.NewClient(st.Pool(), nil)
	enqueued := map[int64]time.Time{}
	tick := time.NewTicker(time.Second / time.Duration(o.Rate))
	end := time.Now().Add(o.Duration)
	for time.Now().Before(end) {
		<-tick.C
		t0 := time.Now()
		res, err := jc.Enqueue(ctx, job.Request{Kind: "bench.mark", Queue: Queue, Args: json.RawMessage(`{}`)})
		if err != nil {
			tick.Stop()
			stop()
			return err
		}
		enqueued[res.Job.ID] = t0
	}
	tick.Stop()
	time.Sleep(time.Second)
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	mu.Lock()
	var ms []float64
	for id, t0 := range enqueued {
		if t1, ok := started[id]; ok {
			ms = append(ms, float64(t1.Sub(t0).Microseconds())/1000)
		}
	}
	mu.Unlock()
	if len(ms) < len(enqueued) {
		return fmt.Errorf("%d of %d jobs were not claimed within a second of the end", len(enqueued)-len(ms), len(enqueued))
	}
	rr.Latency = percentiles(ms)

	// The backlog.
	if err := benchEnqueue(ctx, st, o, r); err != nil {
		return err
	}
	calls.Store(0)
	done.Store(0)
	cpu := startCPU()
	start := time.Now()
	stop = run(time.Second, nil)
	for done.Load() < int64(o.Jobs) {
		select {
		case <-ctx.Done():
			stop()
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	r.Seconds = time.Since(start).Seconds()
	if err := stop(); err != nil {
		return err
	}
	cpu.stop(r)
	r.Jobs, r.JobsPerSec, rr.Calls = o.Jobs, float64(o.Jobs)/r.Seconds, calls.Load()
	return nil
}

func printRemote(w io.Writer, r Result) {
	rr := r.Remote
	fmt.Fprintf(w, "bulk enqueue: %d jobs at %.0f jobs/s\n", r.Jobs, r.EnqueuePerSec)
	fmt.Fprintf(w, "remote workers over HTTP: %d jobs in %.2fs = %.0f jobs/s (%d workers, claim and complete batches of up to %d, %d calls)\n",
		r.Jobs, r.Seconds, r.JobsPerSec, rr.Workers, rr.Batch, rr.Calls)
	l := rr.Latency
	fmt.Fprintf(w, "enqueue → claimed by a long-polling remote worker, %d jobs at %d/s: p50 %.2fms  p95 %.2fms  p99 %.2fms  max %.2fms\n",
		l.N, rr.Rate, l.P50, l.P95, l.P99, l.Max)
}
