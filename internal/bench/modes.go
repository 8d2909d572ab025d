package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

func benchNode(ctx context.Context, url string, o Options, reg prometheus.Registerer, extra ...func(*gaffer.Node)) (*gaffer.Node, error) {
	node, err := gaffer.NewNode(ctx, gaffer.Config{
		DatabaseURL: url, ID: "bench", Queues: map[string]int{Queue: o.Concurrency}, MaxConns: 8,
		ClaimBatch: o.ClaimBatch, FetchCooldown: o.FetchCooldown, TrickleCooldown: o.TrickleCooldown, VacuumThreshold: o.VacuumThreshold,
		JobRetention: o.Retention, Registerer: reg,
		Logger:         hclog.New(&hclog.LoggerOptions{Level: hclog.Warn}),
		TracerProvider: o.Tracer,
	})
	if err != nil {
		return nil, err
	}
	if err := o.Kinds(ctx, node, url); err != nil {
		return nil, err
	}
	for _, e := range extra {
		e(node)
	}
	return node, nil
}

func enqueueBulk(ctx context.Context, client *job.Client, n, batch int) error {
	reqs := make([]job.Request, min(batch, n))
	for i := range reqs {
		reqs[i] = job.Request{Kind: "noop", Queue: Queue, Args: json.RawMessage(`{}`)}
	}
	for left := n; left > 0; left -= batch {
		if _, err := client.EnqueueMany(ctx, reqs[:min(left, batch)]); err != nil {
			return err
		}
	}
	return nil
}

func benchEnqueue(ctx context.Context, st *store.Store, o Options, r *Result) error {
	cpu := startCPU()
	start := time.Now()
	if err := enqueueBulk(ctx, job.NewClient(st.Pool(), nil), o.Jobs, o.Batch); err != nil {
		return err
	}
	r.Jobs, r.Seconds = o.Jobs, time.Since(start).Seconds()
	r.EnqueuePerSec = float64(o.Jobs) / r.Seconds
	cpu.stop(r)
	return nil
}

// benchBacklog times one node working off a pre-inserted backlog: from
// start until every completion has been accepted.
func benchBacklog(ctx context.Context, st *store.Store, o Options, r *Result) error {
	if err := benchEnqueue(ctx, st, o, r); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	node, err := benchNode(ctx, o.URL, o, reg)
	if err != nil {
		return err
	}
	cpu := startCPU()
	start := time.Now()
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer node.Stop(context.Background())
	if err := waitCompleted(ctx, reg, float64(o.Jobs)); err != nil {
		return err
	}
	r.Seconds = time.Since(start).Seconds()
	r.JobsPerSec = float64(o.Jobs) / r.Seconds
	r.Concurrency, r.ClaimBatch = o.Concurrency, o.ClaimBatch
	cpu.stop(r)
	return nil
}

// benchContinuous inserts (COPY batches from two goroutines, keeping at
// most 100,000 jobs outstanding) while one node works, and counts the
// completions in the measured window.
func benchContinuous(ctx context.Context, st *store.Store, o Options, r *Result) error {
	reg := prometheus.NewRegistry()
	node, err := benchNode(ctx, o.URL, o, reg)
	if err != nil {
		return err
	}
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer node.Stop(context.Background())
	client := job.NewClient(st.Pool(), nil)
	var inserted atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				done, _ := completedCount(reg)
				if float64(inserted.Load())-done > 100000 {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				if err := enqueueBulk(ctx, client, 1000, 1000); err != nil {
					errs <- err
					return
				}
				inserted.Add(1000)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(o.Warmup)
	before, _ := completedCount(reg)
	cpu := startCPU()
	start := time.Now()
	select {
	case <-time.After(o.Duration):
	case err := <-errs:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
	after, _ := completedCount(reg)
	r.Seconds = time.Since(start).Seconds()
	r.Jobs = int(after - before)
	r.JobsPerSec = (after - before) / r.Seconds
	r.Concurrency, r.ClaimBatch = o.Concurrency, o.ClaimBatch
	cpu.stop(r)
	return nil
}

// benchLatency enqueues one job at a time at a fixed rate and measures,
// in this process, from just before Enqueue to the handler's start.
func benchLatency(ctx context.Context, st *store.Store, o Options, r *Result) error {
	return measureLatency(ctx, st, o, r, o.URL, nil)
}

// measureLatency puts a load of o.Rate jobs/s on a node connecting to
// nodeURL for o.Duration and records each job's enqueue → handler start;
// during, when set, runs meanwhile, until the load ends.
func measureLatency(ctx context.Context, st *store.Store, o Options, r *Result, nodeURL string, during func(context.Context)) error {
	l, err := startLoad(ctx, st, o, nodeURL, o.Rate, o.Duration)
	if err != nil {
		return err
	}
	defer l.stop()
	cpu := startCPU()
	if during != nil {
		dctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			during(dctx)
		}()
		defer func() { stop(); <-done }()
	}
	if err := l.wait(ctx, time.After(o.Duration)); err != nil {
		return err
	}
	sent, ms, unstarted := l.finish()
	if err := unstartedError(sent, unstarted); err != nil {
		return err
	}
	cpu.stop(r)
	r.Latency = percentiles(ms)
	r.Jobs, r.Seconds = len(ms), o.Duration.Seconds()
	r.JobsPerSec = float64(len(ms)) / o.Duration.Seconds()
	return nil
}

// benchCron runs "@every 1s" entries on a node and reads, from the
// database, how late each occurrence's job was inserted.
func benchCron(ctx context.Context, st *store.Store, o Options, r *Result) error {
	node, err := benchNode(ctx, o.URL, o, nil)
	if err != nil {
		return err
	}
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer node.Stop(context.Background())
	crons := cron.NewClient(st.Pool())
	var names []string
	for i := range o.Entries {
		name := fmt.Sprintf("bench-%d", i)
		if _, err := crons.Create(ctx, cron.Entry{Name: name, Schedule: "@every 1s", Job: cron.JobTemplate{Kind: "noop", Queue: Queue}}); err != nil {
			return err
		}
		names = append(names, name)
	}
	defer func() {
		for _, n := range names {
			crons.Delete(context.WithoutCancel(ctx), "", n)
		}
	}()
	cpu := startCPU()
	time.Sleep(o.Duration)
	cpu.stop(r)
	ms, err := st.CronLateness(ctx, names)
	if err != nil {
		return err
	}
	r.Latency = percentiles(ms)
	r.Jobs, r.Seconds = len(ms), o.Duration.Seconds()
	return nil
}

// benchIdle runs a cluster of idle nodes and counts the database
// transactions they cause.
func benchIdle(ctx context.Context, st *store.Store, o Options, r *Result) error {
	etcd, err := etcdserver.Start("")
	if err != nil {
		return err
	}
	defer etcd.Close()
	var nodes []*gaffer.Node
	defer func() {
		for _, n := range nodes {
			n.Stop(context.Background())
		}
	}()
	for i := range o.Nodes {
		n, err := gaffer.NewNode(ctx, gaffer.Config{DatabaseURL: o.URL, ID: fmt.Sprintf("idle-%d", i+1), TracerProvider: o.Tracer, EtcdEndpoints: []string{etcd.Endpoint()},
			Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn})})
		if err != nil {
			return err
		}
		if err := o.Kinds(ctx, n, o.URL, etcd.Endpoint()); err != nil {
			return err
		}
		if err := n.Start(ctx); err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	time.Sleep(5 * time.Second) // settle: election, first sweeps
	before, err := st.TransactionCount(ctx)
	if err != nil {
		return err
	}
	cpu := startCPU()
	time.Sleep(o.Duration)
	after, err := st.TransactionCount(ctx)
	if err != nil {
		return err
	}
	cpu.stop(r)
	r.Nodes, r.Seconds = o.Nodes, o.Duration.Seconds()
	// Our own two reads of the counter are not the nodes' doing.
	r.TxPerSecPerNode = float64(after-before-2) / o.Duration.Seconds() / float64(o.Nodes)
	return nil
}
