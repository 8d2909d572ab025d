package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/store"
)

// Queue is the queue every mode works: it must be empty when one starts.
const Queue = "bench"

// latencies are percentiles in milliseconds.
type latencies struct {
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
	N   int     `json:"samples"`
}

// Result is what a mode measured; bench --json prints it.
type Result struct {
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
	Soak *soakResult `json:"soak,omitempty"`
	// Cost mode: Gaffer and the plain loop at one rate.
	Cost *costResult `json:"cost,omitempty"`
	// Sequences mode: the sequences and the proof.
	Sequences *sequenceResult `json:"sequences,omitempty"`
	// Batches mode.
	Batch     *batchResult `json:"batch,omitempty"`
	GoVersion string       `json:"go_version"`
	CPUs      int          `json:"cpus"`
}

// Options are a run's settings; each is a flag of gaffer bench (whose
// help says which modes read it), positive unless said otherwise.
type Options struct {
	Jobs, Batch, Concurrency, ClaimBatch, Nodes, Rate, Entries, Limit, Workers int
	// Sequences and PerSequence: the sequences mode's sequences and jobs
	// per sequence.
	Sequences, PerSequence int
	// Batches and BatchSize: bench batches' batches and jobs per batch.
	Batches, BatchSize int
	// Duration is how long to measure; Warmup (not negative) the time
	// before measuring; Hold how long each job runs in the limits mode.
	Duration, Warmup, Hold time.Duration
	// URL is the PostgreSQL the modes measure (its nodes open their own
	// pools on it).
	URL string
	// Soak: finished jobs' retention, the sampling interval, and whether
	// --rate was given (else the soak measures capacity and takes 80%).
	Retention, Sample time.Duration
	RateSet           bool
	// Pressure is bench pressure's kind: backend-kill (also when empty),
	// idle-in-tx, readers or restart.
	Pressure string
	// Restart restarts the measured PostgreSQL as a crash does, and
	// returns once it accepts connections again: pressure restart's, set
	// only when the bench runs its own throwaway server.
	Restart func(ctx context.Context) error
	// Pressure backend-kill: how often the node's connections are
	// terminated.
	KillEvery time.Duration
	// Pressure idle-in-tx, readers and restart: the clean phase before
	// the pressure, and how long it lasts (0: to the end of the measure);
	// both whole multiples of Sample.
	Clean, HoldFor time.Duration
	// Pressure readers: the reading sessions, and how long each of their
	// transactions lasts at least.
	Readers int
	ReadFor time.Duration
	// FetchCooldown is the nodes' least time between two claims of a
	// queue (gaffer.Config.FetchCooldown; 0: its default).
	FetchCooldown time.Duration
	// TrickleCooldown is the nodes' least time between a short claim and
	// the next (gaffer.Config.TrickleCooldown; 0: its default).
	TrickleCooldown time.Duration
	// VacuumThreshold is the nodes' gaffer.Config.VacuumThreshold (0: its
	// default; negative: leave gaffer.jobs to autovacuum).
	VacuumThreshold int64
	// tracer is what the OTEL_* variables ask for, as on a server: the
	// no-op provider unless they do.
	Tracer trace.TracerProvider
	// Kinds registers on each node the handlers a production node has
	// (noop, which the modes enqueue, among them); own are the node's
	// endpoints besides dbURL's hosts (its etcd), for the http kind's
	// guard to refuse.
	Kinds func(ctx context.Context, n *gaffer.Node, dbURL string, own ...string) error
}

// modes are the measurements by name.
var modes = map[string]func(context.Context, *store.Store, Options, *Result) error{
	"backlog": benchBacklog, "continuous": benchContinuous, "latency": benchLatency, "cron": benchCron, "idle": benchIdle, "enqueue": benchEnqueue,
	"dashboard": benchDashboard, "fairness": benchFairness, "limits": benchLimits, "remote": benchRemote, "soak": benchSoak,
	"pressure": benchPressure, "cost": benchCost, "sequences": benchSequences, "batches": benchBatches,
}

// Modes are the modes' names, sorted.
func Modes() []string { return slices.Sorted(maps.Keys(modes)) }

// Run measures mode on st (migrated up, Queue empty and emptied again
// afterwards) with o, and returns the result with this process's peak
// memory. It blocks for the measurement (o.Duration and more); ctx ends it
// early with an error.
func Run(ctx context.Context, st *store.Store, mode string, o Options) (Result, error) {
	run, ok := modes[mode]
	if !ok {
		return Result{}, fmt.Errorf("no bench mode %q", mode)
	}
	if _, err := st.MigrateUp(ctx); err != nil {
		return Result{}, err
	}
	if n, err := st.CountQueueJobs(ctx, Queue); err != nil {
		return Result{}, err
	} else if n > 0 {
		return Result{}, fmt.Errorf("queue %q already holds %d jobs; bench needs it empty", Queue, n)
	}
	defer st.DeleteQueueJobs(context.WithoutCancel(ctx), Queue)
	postmaster = findPostmaster(ctx, st)
	res := Result{Mode: mode, GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
	if err := run(ctx, st, o, &res); err != nil {
		return res, err
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	res.PeakRSSMB = float64(ru.Maxrss) / 1024
	return res, nil
}

// WriteSVG draws a soak's series (r.Soak) as an SVG plot to w.
func WriteSVG(w io.Writer, r Result, retention time.Duration) error {
	if r.Soak == nil {
		return fmt.Errorf("a %s result has no series to plot", r.Mode)
	}
	return writeSoakSVG(w, r.Soak, retention.Minutes()+1)
}

// Print writes r for a reader to w.
func Print(w io.Writer, r Result) error {
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
		printPressure(w, r)
	case "cron":
		fmt.Fprintf(w, "cron lateness (scheduled instant → job inserted, database clock), %d fires: p50 %.2fms  p95 %.2fms  p99 %.2fms  max %.2fms\n",
			r.Latency.N, r.Latency.P50, r.Latency.P95, r.Latency.P99, r.Latency.Max)
	case "idle":
		fmt.Fprintf(w, "idle cluster of %d nodes: %.2f database transactions/s per node\n", r.Nodes, r.TxPerSecPerNode)
	case "enqueue":
		fmt.Fprintf(w, "bulk enqueue: %d jobs at %.0f jobs/s\n", r.Jobs, r.EnqueuePerSec)
	case "batches":
		printBatches(w, r)
	case "fairness", "limits":
		printFair(w, r)
	case "remote":
		printRemote(w, r)
	case "soak":
		printSoak(w, r)
	case "cost":
		printCost(w, r)
	case "sequences":
		printSequences(w, r)
	case "dashboard":
		fmt.Fprintf(w, "dashboard pages with %d jobs in the table (median and slowest of %d requests each):\n", r.Jobs, r.Pages[0].N)
		for _, p := range r.Pages {
			fmt.Fprintf(w, "  %-34s p50 %7.2fms  max %7.2fms\n", p.Path, p.P50, p.Max)
		}
	}
	if r.Mode != "cost" { // which says its CPU per job
		fmt.Fprintf(w, "cpu: this process %.2f cores, postgres %.2f cores; ", r.ClientCores, r.PostgresCores)
	}
	fmt.Fprintf(w, "peak memory %.0f MB\n", r.PeakRSSMB)
	return nil
}

// PrintStatements writes where PostgreSQL spent its time (its
// pg_stat_statements) to w.
func PrintStatements(ctx context.Context, w io.Writer, st *store.Store) error {
	stats, err := st.TopStatements(ctx, 8)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "PostgreSQL time by statement:")
	for _, s := range stats {
		fmt.Fprintf(w, "  %6.1f%%  %8.0f ms  %8d calls  %8d rows  %s\n", s.Share*100, s.TotalMS, s.Calls, s.Rows, s.Query)
	}
	return nil
}
