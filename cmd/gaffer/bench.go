package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/internal/store"
	"github.com/gafferhq/gaffer/job"
)

const benchQueue = "bench"

// latencies are percentiles in milliseconds.
type latencies struct {
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
	N   int     `json:"samples"`
}

type benchResult struct {
	Mode          string     `json:"mode"`
	Jobs          int        `json:"jobs"`
	Seconds       float64    `json:"seconds"`
	JobsPerSec    float64    `json:"jobs_per_sec"`
	EnqueuePerSec float64    `json:"enqueue_jobs_per_sec,omitempty"`
	Latency       *latencies `json:"latency,omitempty"`
	// Idle mode: database transactions per second per node.
	TxPerSecPerNode float64 `json:"tx_per_sec_per_node,omitempty"`
	// Average cores used while measuring: this process (the nodes and the
	// load generator) and the PostgreSQL server (local servers only).
	ClientCores   float64 `json:"client_cores"`
	PostgresCores float64 `json:"postgres_cores"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	Concurrency   int     `json:"concurrency,omitempty"`
	ClaimBatch    int     `json:"claim_batch,omitempty"`
	Nodes         int     `json:"nodes,omitempty"`
	// Dashboard mode: each page's serving time.
	Pages []pageTiming `json:"pages,omitempty"`
	// Fairness and limits modes.
	Fair *fairResult `json:"fair,omitempty"`
	// Remote mode.
	Remote    *remoteResult `json:"remote,omitempty"`
	GoVersion string        `json:"go_version"`
	CPUs      int           `json:"cpus"`
}

type benchOpts struct {
	jobs, batch, concurrency, claimBatch, nodes, rate, entries, limit, workers int
	duration, warmup, hold                                                     time.Duration
	url                                                                        string
}

func (m *Main) runBench(ctx context.Context, args []string) error {
	fs := m.newFlagSet("bench", `bench MODE [flags]

Modes:
  backlog     insert --jobs no-op jobs, then time one node working them off
  continuous  insert and work at the same time for --duration; report jobs/s
  latency     enqueue one job at a time at --rate jobs/s; report enqueue→start
  cron        run --entries "@every 1s" cron entries; report fire lateness
  idle        run --nodes idle nodes (with etcd); report database load per node
  enqueue     bulk enqueue (COPY) only
  dashboard   fill the job table with --jobs jobs in mixed states; time each
              dashboard page
  fairness    tenant a has a --jobs backlog; tenant b enqueues --rate jobs/s
              into the same queue: a's drain rate, b's enqueue→start latency
  limits      work off --jobs with no limit, with a limit that does not bind,
              and with one of --limit running at once (jobs holding --hold)
  remote      --workers remote workers over HTTP (loopback) work off --jobs,
              claiming and completing up to --claim-batch at once; then
              enqueue→claim latency at --rate while they long-poll

Without --database-url a throwaway PostgreSQL is started (fsync on,
shared_buffers=1GB). Jobs go to the queue "bench", which must be empty.`)
	dbURL := fs.String("database-url", "DATABASE_URL", "", "PostgreSQL to measure (default: a throwaway server)")
	o := benchOpts{}
	jobs := fs.Int("jobs", "-", 100000, "backlog, enqueue, dashboard: jobs to insert")
	batch := fs.Int("batch", "-", 10000, "jobs per enqueue call")
	concurrency := fs.Int("concurrency", "-", 2000, "jobs the node runs at once")
	claimBatch := fs.Int("claim-batch", "-", 1000, "most jobs one claim takes")
	nodes := fs.Int("nodes", "-", 3, "idle: nodes to run")
	rate := fs.Int("rate", "-", 0, "latency (default 100), fairness (default 20): jobs per second")
	entries := fs.Int("entries", "-", 10, "cron: entries")
	limit := fs.Int("limit", "-", 50, "limits: the binding limit's concurrency")
	hold := fs.Duration("hold", "-", 100*time.Millisecond, "limits: how long each job runs under the binding limit")
	workers := fs.Int("workers", "-", 8, "remote: remote workers (each a goroutine calling the API over HTTP)")
	duration := fs.Duration("duration", "-", 30*time.Second, "continuous, latency, cron, idle: how long to measure")
	warmup := fs.Duration("warmup", "-", 5*time.Second, "continuous: time before measuring")
	asJSON := fs.Bool("json", "-", false, "print the result as JSON")
	cpuProfile := fs.String("cpuprofile", "-", "", "write a CPU profile of the measured phase to this file")
	pgStats := fs.Bool("pg-statements", "-", false, "throwaway server only: print where PostgreSQL spent its time")
	if err := fs.parse(args); err != nil {
		return err
	}
	modes := map[string]func(context.Context, *store.Store, benchOpts, *benchResult) error{
		"backlog": benchBacklog, "continuous": benchContinuous, "latency": benchLatency, "cron": benchCron, "idle": benchIdle, "enqueue": benchEnqueue,
		"dashboard": benchDashboard, "fairness": benchFairness, "limits": benchLimits, "remote": benchRemote,
	}
	run, ok := modes[fs.Arg(0)]
	if fs.NArg() != 1 || !ok {
		fs.Usage()
		return usageError("bench needs a mode: backlog, continuous, latency, cron, idle, enqueue, dashboard, fairness, limits or remote")
	}
	if *rate == 0 {
		*rate = map[string]int{"fairness": 20}[fs.Arg(0)]
		if *rate == 0 {
			*rate = 100
		}
	}
	o = benchOpts{jobs: *jobs, batch: *batch, concurrency: *concurrency, claimBatch: *claimBatch, nodes: *nodes, rate: *rate,
		entries: *entries, duration: *duration, warmup: *warmup, limit: *limit, hold: *hold, workers: *workers}
	if o.limit < 1 || o.hold <= 0 {
		return usageError("--limit and --hold must be positive")
	}
	for name, v := range map[string]int{"jobs": o.jobs, "batch": o.batch, "concurrency": o.concurrency, "claim-batch": o.claimBatch, "nodes": o.nodes, "rate": o.rate, "entries": o.entries, "workers": o.workers} {
		if v < 1 {
			return usageError(fmt.Sprintf("--%s must be positive", name))
		}
	}
	if o.duration <= 0 || o.warmup < 0 {
		return usageError("--duration must be positive and --warmup not negative")
	}
	o.url = *dbURL
	if o.url == "" {
		settings := map[string]string{"shared_buffers": "1GB"}
		if *pgStats {
			settings["shared_preload_libraries"] = "pg_stat_statements"
		}
		srv, err := pgserver.Start(ctx, pgserver.Config{Durable: true, Settings: settings})
		if err != nil {
			return err
		}
		defer srv.Stop()
		o.url = srv.URL()
	}
	st, err := store.Open(ctx, o.url, 8)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.MigrateUp(ctx); err != nil {
		return err
	}
	if n, err := st.CountQueueJobs(ctx, benchQueue); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("queue %q already holds %d jobs; bench needs it empty", benchQueue, n)
	}
	defer st.DeleteQueueJobs(context.WithoutCancel(ctx), benchQueue)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	res := benchResult{Mode: fs.Arg(0), GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
	if err := run(ctx, st, o, &res); err != nil {
		return err
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	res.PeakRSSMB = float64(ru.Maxrss) / 1024
	if *pgStats && *dbURL == "" {
		if err := printStatements(ctx, m, st); err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(m.Stdout).Encode(res)
	}
	return printBench(m, res)
}

func printBench(m *Main, r benchResult) error {
	w := m.Stdout
	switch r.Mode {
	case "backlog":
		fmt.Fprintf(w, "bulk enqueue: %d jobs at %.0f jobs/s\n", r.Jobs, r.EnqueuePerSec)
		fmt.Fprintf(w, "work backlog: %d jobs in %.2fs = %.0f jobs/s (concurrency %d, claim batch %d)\n", r.Jobs, r.Seconds, r.JobsPerSec, r.Concurrency, r.ClaimBatch)
	case "continuous":
		fmt.Fprintf(w, "continuous insert + work: %d jobs in %.1fs = %.0f jobs/s (concurrency %d)\n", r.Jobs, r.Seconds, r.JobsPerSec, r.Concurrency)
	case "latency":
		fmt.Fprintf(w, "enqueue → handler start, %d jobs at %.0f/s: p50 %.2fms  p95 %.2fms  p99 %.2fms  max %.2fms\n",
			r.Latency.N, r.JobsPerSec, r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.Max)
	case "cron":
		fmt.Fprintf(w, "cron lateness (scheduled instant → job inserted, database clock), %d fires: p50 %.2fms  p95 %.2fms  p99 %.2fms  max %.2fms\n",
			r.Latency.N, r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.Max)
	case "idle":
		fmt.Fprintf(w, "idle cluster of %d nodes: %.2f database transactions/s per node\n", r.Nodes, r.TxPerSecPerNode)
	case "enqueue":
		fmt.Fprintf(w, "bulk enqueue: %d jobs at %.0f jobs/s\n", r.Jobs, r.EnqueuePerSec)
	case "fairness", "limits":
		printFair(m, r)
	case "remote":
		printRemote(m, r)
	case "dashboard":
		fmt.Fprintf(w, "dashboard pages with %d jobs in the table (median and slowest of %d requests each):\n", r.Jobs, r.Pages[0].N)
		for _, p := range r.Pages {
			fmt.Fprintf(w, "  %-34s p50 %7.2fms  max %7.2fms\n", p.Path, p.P50, p.Max)
		}
	}
	fmt.Fprintf(w, "cpu: this process %.2f cores, postgres %.2f cores; peak memory %.0f MB\n", r.ClientCores, r.PostgresCores, r.PeakRSSMB)
	return nil
}

// cpuMeter measures the cores used by this process and by local
// PostgreSQL processes between start and stop.
type cpuMeter struct {
	start    time.Time
	self, pg time.Duration
}

func startCPU() *cpuMeter { return &cpuMeter{start: time.Now(), self: selfCPU(), pg: postgresCPU()} }

func (c *cpuMeter) stop(r *benchResult) {
	wall := time.Since(c.start).Seconds()
	r.ClientCores = (selfCPU() - c.self).Seconds() / wall
	r.PostgresCores = (postgresCPU() - c.pg).Seconds() / wall
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// postgresCPU sums user+system time of every process named postgres.
func postgresCPU() time.Duration {
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, closeIdx := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closeIdx < 0 || s[open+1:closeIdx] != "postgres" {
			continue
		}
		f := strings.Fields(s[closeIdx+2:])
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			k, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + k
		}
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

func benchNode(ctx context.Context, url string, o benchOpts, reg prometheus.Registerer, extra ...func(*gaffer.Node)) (*gaffer.Node, error) {
	hooks, err := newWebhooks(ctx, nil, nil, url)
	if err != nil {
		return nil, err
	}
	node, err := gaffer.NewNode(ctx, gaffer.Config{
		DatabaseURL: url, ID: "bench", Queues: map[string]int{benchQueue: o.concurrency}, MaxConns: 8,
		ClaimBatch: o.claimBatch, Registerer: reg, Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn}),
	})
	if err != nil {
		return nil, err
	}
	registerBuiltinKinds(node, hooks)
	for _, e := range extra {
		e(node)
	}
	return node, nil
}

func enqueueBulk(ctx context.Context, client *job.Client, n, batch int) error {
	reqs := make([]job.Request, min(batch, n))
	for i := range reqs {
		reqs[i] = job.Request{Kind: "noop", Queue: benchQueue, Args: json.RawMessage(`{}`)}
	}
	for left := n; left > 0; left -= batch {
		if _, err := client.EnqueueMany(ctx, reqs[:min(left, batch)]); err != nil {
			return err
		}
	}
	return nil
}

func benchEnqueue(ctx context.Context, st *store.Store, o benchOpts, r *benchResult) error {
	cpu := startCPU()
	start := time.Now()
	if err := enqueueBulk(ctx, job.NewClient(st.Pool(), nil), o.jobs, o.batch); err != nil {
		return err
	}
	r.Jobs, r.Seconds = o.jobs, time.Since(start).Seconds()
	r.EnqueuePerSec = float64(o.jobs) / r.Seconds
	cpu.stop(r)
	return nil
}

// benchBacklog times one node working off a pre-inserted backlog: from
// start until every completion has been accepted.
func benchBacklog(ctx context.Context, st *store.Store, o benchOpts, r *benchResult) error {
	if err := benchEnqueue(ctx, st, o, r); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	node, err := benchNode(ctx, o.url, o, reg)
	if err != nil {
		return err
	}
	cpu := startCPU()
	start := time.Now()
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer node.Stop(context.Background())
	if err := waitCompleted(ctx, reg, float64(o.jobs)); err != nil {
		return err
	}
	r.Seconds = time.Since(start).Seconds()
	r.JobsPerSec = float64(o.jobs) / r.Seconds
	r.Concurrency, r.ClaimBatch = o.concurrency, o.claimBatch
	cpu.stop(r)
	return nil
}

// benchContinuous inserts (COPY batches from two goroutines, keeping at
// most 100,000 jobs outstanding) while one node works, and counts the
// completions in the measured window.
func benchContinuous(ctx context.Context, st *store.Store, o benchOpts, r *benchResult) error {
	reg := prometheus.NewRegistry()
	node, err := benchNode(ctx, o.url, o, reg)
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
	time.Sleep(o.warmup)
	before, _ := completedCount(reg)
	cpu := startCPU()
	start := time.Now()
	select {
	case <-time.After(o.duration):
	case err := <-errs:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
	after, _ := completedCount(reg)
	r.Seconds = time.Since(start).Seconds()
	r.Jobs = int(after - before)
	r.JobsPerSec = (after - before) / r.Seconds
	r.Concurrency, r.ClaimBatch = o.concurrency, o.claimBatch
	cpu.stop(r)
	return nil
}

// benchLatency enqueues one job at a time at a fixed rate and measures,
// in this process, from just before Enqueue to the handler's start.
func benchLatency(ctx context.Context, st *store.Store, o benchOpts, r *benchResult) error {
	var mu sync.Mutex
	started := map[int64]time.Time{}
	node, err := benchNode(ctx, o.url, o, nil, func(n *gaffer.Node) {
		n.HandleFunc("bench.mark", func(ctx context.Context, j *job.Job) error {
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
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer node.Stop(context.Background())
	time.Sleep(time.Second) // the first, immediate poll has passed
	client := job.NewClient(st.Pool(), nil)
	enqueued := map[int64]time.Time{}
	cpu := startCPU()
	tick := time.NewTicker(time.Second / time.Duration(o.rate))
	defer tick.Stop()
	end := time.Now().Add(o.duration)
	for time.Now().Before(end) {
		<-tick.C
		t0 := time.Now()
		res, err := client.Enqueue(ctx, job.Request{Kind: "bench.mark", Queue: benchQueue})
		if err != nil {
			return err
		}
		enqueued[res.Job.ID] = t0
	}
	time.Sleep(time.Second)
	cpu.stop(r)
	mu.Lock()
	defer mu.Unlock()
	var ms []float64
	for id, t0 := range enqueued {
		if t1, ok := started[id]; ok {
			ms = append(ms, float64(t1.Sub(t0).Microseconds())/1000)
		}
	}
	if len(ms) < len(enqueued) {
		return fmt.Errorf("%d of %d jobs did not start within a second of the end", len(enqueued)-len(ms), len(enqueued))
	}
	r.Latency = percentiles(ms)
	r.Jobs, r.Seconds = len(ms), o.duration.Seconds()
	r.JobsPerSec = float64(len(ms)) / o.duration.Seconds()
	return nil
}

// benchCron runs "@every 1s" entries on a node and reads, from the
// database, how late each occurrence's job was inserted.
func benchCron(ctx context.Context, st *store.Store, o benchOpts, r *benchResult) error {
	node, err := benchNode(ctx, o.url, o, nil)
	if err != nil {
		return err
	}
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer node.Stop(context.Background())
	crons := cron.NewClient(st.Pool())
	var names []string
	for i := range o.entries {
		name := fmt.Sprintf("bench-%d", i)
		if _, err := crons.Create(ctx, cron.Entry{Name: name, Schedule: "@every 1s", Job: cron.JobTemplate{Kind: "noop", Queue: benchQueue}}); err != nil {
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
	time.Sleep(o.duration)
	cpu.stop(r)
	ms, err := st.CronLateness(ctx, names)
	if err != nil {
		return err
	}
	r.Latency = percentiles(ms)
	r.Jobs, r.Seconds = len(ms), o.duration.Seconds()
	return nil
}

// benchIdle runs a cluster of idle nodes and counts the database
// transactions they cause.
func benchIdle(ctx context.Context, st *store.Store, o benchOpts, r *benchResult) error {
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
	for i := range o.nodes {
		hooks, err := newWebhooks(ctx, nil, nil, o.url, etcd.Endpoint())
		if err != nil {
			return err
		}
		n, err := gaffer.NewNode(ctx, gaffer.Config{DatabaseURL: o.url, ID: fmt.Sprintf("idle-%d", i+1), EtcdEndpoints: []string{etcd.Endpoint()},
			Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn})})
		if err != nil {
			return err
		}
		registerBuiltinKinds(n, hooks)
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
	time.Sleep(o.duration)
	after, err := st.TransactionCount(ctx)
	if err != nil {
		return err
	}
	cpu.stop(r)
	r.Nodes, r.Seconds = o.nodes, o.duration.Seconds()
	// Our own two reads of the counter are not the nodes' doing.
	r.TxPerSecPerNode = float64(after-before-2) / o.duration.Seconds() / float64(o.nodes)
	return nil
}

func percentiles(ms []float64) *latencies {
	if len(ms) == 0 {
		return &latencies{}
	}
	sort.Float64s(ms)
	at := func(p float64) float64 { return ms[min(len(ms)-1, int(p*float64(len(ms))))] }
	return &latencies{P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: ms[len(ms)-1], N: len(ms)}
}

func waitCompleted(ctx context.Context, reg *prometheus.Registry, n float64) error {
	for {
		done, err := completedCount(reg)
		if err != nil {
			return err
		}
		if done >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func completedCount(reg *prometheus.Registry) (float64, error) {
	families, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "gaffer_job_completed_total" {
			continue
		}
		for _, mf := range f.GetMetric() {
			total += mf.GetCounter().GetValue()
		}
	}
	return total, nil
}

// printStatements shows where PostgreSQL spent its time.
func printStatements(ctx context.Context, m *Main, st *store.Store) error {
	stats, err := st.TopStatements(ctx, 8)
	if err != nil {
		return err
	}
	fmt.Fprintln(m.Stdout, "PostgreSQL time by statement:")
	for _, s := range stats {
		fmt.Fprintf(m.Stdout, "  %6.1f%%  %8.0f ms  %8d calls  %8d rows  %s\n", s.Share*100, s.TotalMS, s.Calls, s.Rows, s.Query)
	}
	return nil
}
