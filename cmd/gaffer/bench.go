package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"

	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/store"
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
	Remote *remoteResult `json:"remote,omitempty"`
	// Pressure mode: what was done to the node meanwhile.
	Pressure *pressureResult `json:"pressure,omitempty"`
	// Soak mode: the series and its summary.
	Soak      *soakResult `json:"soak,omitempty"`
	GoVersion string      `json:"go_version"`
	CPUs      int         `json:"cpus"`
}

type benchOpts struct {
	jobs, batch, concurrency, claimBatch, nodes, rate, entries, limit, workers int
	duration, warmup, hold                                                     time.Duration
	url                                                                        string
	// Soak: finished jobs' retention, the sampling interval, and whether
	// --rate was given (else the soak measures capacity and takes 80%).
	retention, sample time.Duration
	rateSet           bool
	// Pressure backend-kill: how often the node's connections are
	// terminated.
	killEvery time.Duration
	// tracer is what the OTEL_* variables ask for, as on a server: the
	// no-op provider unless they do.
	tracer trace.TracerProvider
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
              into the same queue: a's drain rate, b's enqueue→start
              latency, beside the same backlog drained alone (backlog)
  limits      work off --jobs with no limit, with a limit that does not bind,
              and with one of --limit running at once (jobs holding --hold)
  remote      --workers remote workers over HTTP (loopback) work off --jobs,
              claiming and completing up to --claim-batch at once; then
              enqueue→claim latency at --rate while they long-poll
  pressure backend-kill
              latency's load at --rate while PostgreSQL terminates every
              connection of the node every --kill-every (as a pooler or an
              operator does); report enqueue→start and the kills
  soak        enqueue at --rate jobs/s (default: 80% of a 30s continuous
              run) for --duration, finished jobs deleted after --retention;
              every --sample: throughput, enqueue→start p99, table and
              index size (--svg draws them)

Without --database-url a throwaway PostgreSQL is started (fsync on,
shared_buffers=1GB). Jobs go to the queue "bench", which must be empty.`)
	dbURL := fs.String("database-url", "DATABASE_URL", "", "PostgreSQL to measure (default: a throwaway server)")
	o := benchOpts{}
	jobs := fs.Int("jobs", "-", 100000, "backlog, enqueue, dashboard: jobs to insert")
	batch := fs.Int("batch", "-", 10000, "jobs per enqueue call")
	concurrency := fs.Int("concurrency", "-", 2000, "jobs the node runs at once")
	claimBatch := fs.Int("claim-batch", "-", 1000, "most jobs one claim takes")
	nodes := fs.Int("nodes", "-", 3, "idle: nodes to run")
	rate := fs.Int("rate", "-", 0, "latency (default 100), fairness (default 20), soak (default 80% of capacity): jobs per second")
	entries := fs.Int("entries", "-", 10, "cron: entries")
	limit := fs.Int("limit", "-", 50, "limits: the binding limit's concurrency")
	hold := fs.Duration("hold", "-", 100*time.Millisecond, "limits: how long each job runs under the binding limit")
	workers := fs.Int("workers", "-", 8, "remote: remote workers (each a goroutine calling the API over HTTP)")
	duration := fs.Duration("duration", "-", 30*time.Second, "continuous, latency, cron, idle, pressure, soak: how long to measure")
	killEvery := fs.Duration("kill-every", "-", 250*time.Millisecond, "pressure backend-kill: how often the node's connections are terminated")
	retention := fs.Duration("retention", "-", 5*time.Minute, "soak: how long finished jobs are kept")
	sample := fs.Duration("sample", "-", time.Minute, "soak: the sampling interval")
	svg := fs.String("svg", "-", "", "soak: write a plot of the series to this SVG file")
	replot := fs.String("replot", "-", "", "soak: run nothing; redraw --svg from this earlier --json result")
	warmup := fs.Duration("warmup", "-", 5*time.Second, "continuous: time before measuring")
	asJSON := fs.Bool("json", "-", false, "print the result as JSON")
	cpuProfile := fs.String("cpuprofile", "-", "", "write a CPU profile of the measured phase to this file")
	pgStats := fs.Bool("pg-statements", "-", false, "throwaway server only: print where PostgreSQL spent its time")
	pgSettings := fs.String("pg-settings", "-", "", "throwaway server only: extra settings, name=value[,name=value...] (e.g. autovacuum_naptime=10s)")
	modes := map[string]func(context.Context, *store.Store, benchOpts, *benchResult) error{
		"backlog": benchBacklog, "continuous": benchContinuous, "latency": benchLatency, "cron": benchCron, "idle": benchIdle, "enqueue": benchEnqueue,
		"dashboard": benchDashboard, "fairness": benchFairness, "limits": benchLimits, "remote": benchRemote, "soak": benchSoak,
		"pressure": benchPressure,
	}
	fs.choices = slices.Sorted(maps.Keys(modes))
	if err := fs.parse(args); err != nil {
		return err
	}
	run, ok := modes[fs.Arg(0)]
	want := 1
	if fs.Arg(0) == "pressure" {
		want = 2 // pressure KIND
	}
	if fs.NArg() != want || !ok {
		fs.Usage()
		return usageError("bench needs a mode: backlog, continuous, latency, cron, idle, enqueue, dashboard, fairness, limits, pressure backend-kill, remote or soak")
	}
	if fs.Arg(0) == "pressure" && fs.Arg(1) != "backend-kill" {
		return usageError(fmt.Sprintf("bench pressure %q: the pressure built is backend-kill", fs.Arg(1)))
	}
	rateSet := *rate != 0
	if *rate == 0 {
		*rate = map[string]int{"fairness": 20}[fs.Arg(0)]
		if *rate == 0 {
			*rate = 100
		}
	}
	o = benchOpts{jobs: *jobs, batch: *batch, concurrency: *concurrency, claimBatch: *claimBatch, nodes: *nodes, rate: *rate,
		entries: *entries, duration: *duration, warmup: *warmup, limit: *limit, hold: *hold, workers: *workers,
		retention: *retention, sample: *sample, rateSet: rateSet, killEvery: *killEvery}
	if o.retention <= 0 || o.sample <= 0 {
		return usageError("--retention and --sample must be positive")
	}
	if fs.Arg(0) != "soak" {
		o.retention = 0 // the node's default: nothing is deleted while measuring
	}
	if o.limit < 1 || o.hold <= 0 {
		return usageError("--limit and --hold must be positive")
	}
	for name, v := range map[string]int{"jobs": o.jobs, "batch": o.batch, "concurrency": o.concurrency, "claim-batch": o.claimBatch, "nodes": o.nodes, "rate": o.rate, "entries": o.entries, "workers": o.workers} {
		if v < 1 {
			return usageError(fmt.Sprintf("--%s must be positive", name))
		}
	}
	if o.killEvery <= 0 {
		return usageError("--kill-every must be positive")
	}
	if o.duration <= 0 || o.warmup < 0 {
		return usageError("--duration must be positive and --warmup not negative")
	}
	if *replot != "" {
		return replotSoak(m, *replot, *svg)
	}
	tp, stopTracing, err := startTracing(ctx, hclog.New(&hclog.LoggerOptions{Name: "bench", Output: m.Stderr}))
	if err != nil {
		return err
	}
	defer stopTracing()
	o.tracer = tp.TracerProvider
	o.url = *dbURL
	if o.url == "" {
		settings := map[string]string{"shared_buffers": "1GB"}
		if *pgStats {
			settings["shared_preload_libraries"] = "pg_stat_statements"
		}
		for kv := range strings.SplitSeq(*pgSettings, ",") {
			if kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usageError("--pg-settings takes name=value pairs separated by commas")
			}
			settings[strings.TrimSpace(k)] = strings.TrimSpace(v)
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
	if *svg != "" && res.Soak != nil {
		f, err := os.Create(*svg)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := writeSoakSVG(f, res.Soak, o.retention.Minutes()+1); err != nil {
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
	case "pressure":
		fmt.Fprintf(w, "%s: %d connections of the node terminated, every %s\n", r.Pressure.Kind, r.Pressure.Terminated, r.Pressure.Every)
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
	case "soak":
		printSoak(m, r)
	case "dashboard":
		fmt.Fprintf(w, "dashboard pages with %d jobs in the table (median and slowest of %d requests each):\n", r.Jobs, r.Pages[0].N)
		for _, p := range r.Pages {
			fmt.Fprintf(w, "  %-34s p50 %7.2fms  max %7.2fms\n", p.Path, p.P50, p.Max)
		}
	}
	fmt.Fprintf(w, "cpu: this process %.2f cores, postgres %.2f cores; peak memory %.0f MB\n", r.ClientCores, r.PostgresCores, r.PeakRSSMB)
	return nil
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
