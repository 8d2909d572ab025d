package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/internal/bench"
	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/store"
)

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
  pressure idle-in-tx
              a load at --rate jobs/s (default: half of a 30s continuous
              run) for --duration; after --clean, a session of its own
              takes an xid and a REPEATABLE READ snapshot of gaffer.jobs
              and sits idle in transaction for --hold-for (default: to the
              end). Every --sample (default 10s): throughput, enqueue→start
              p50/p99, gaffer.jobs' size and dead rows; the phases'
              figures, and how long after the release every interval's p99
              is back within the clean phase's worst. The issue's goal run
              (10 minutes at 50% of capacity, back within 60s):
                bench pressure idle-in-tx --clean 1m --hold-for 10m
                  --duration 13m --sample 10s
  pressure readers
              the same load and phases, the pressure being --readers
              sessions running REPEATABLE READ transactions one after
              another, each scanning gaffer.jobs and gaffer.dlq whole
              again and again for at least --read-for; reports the scans
  pressure restart
              the same load and phases (--rate default 100, --sample 1s,
              --hold-for one sample), the pressure being a restart of the bench's
              throwaway PostgreSQL as after a crash (immediate shutdown,
              recovery on start); reports how long the server took to
              come back, and each second's enqueue→start p50/p99 through it
  soak        enqueue at --rate jobs/s (default: 80% of a 30s continuous
              run) for --duration, finished jobs deleted after --retention;
              every --sample: throughput, enqueue→start p99, table and
              index size (--svg draws them)
  sequences   enqueue --per-sequence jobs into each of --sequences sequences,
              then time one node working them off; the handler checks that
              no sequence ever ran two jobs at once or out of order
  batches     --batches batches of --batch-size no-op jobs, each opened,
              filled and closed, then one node works them off: throughput,
              and per batch its last job's completion → its callback's start
  cost        enqueue at --rate jobs/s (default 600) for --duration while a
              node of --concurrency slots works them, then while as many
              plain SELECT … FOR UPDATE SKIP LOCKED workers do: PostgreSQL
              CPU (its own process accounting: a local server) and this
              process's per 1,000 jobs, and enqueue→start, side by side

Without --database-url a throwaway PostgreSQL is started (fsync on,
shared_buffers=1GB). Jobs go to the queue "bench", which must be empty.`)
	dbURL := fs.String("database-url", "DATABASE_URL", "", "PostgreSQL to measure (default: a throwaway server)")
	jobs := fs.Int("jobs", "-", 100000, "backlog, enqueue, dashboard: jobs to insert")
	batch := fs.Int("batch", "-", 10000, "jobs per enqueue call")
	batches := fs.Int("batches", "-", 1000, "batches: batches to run")
	batchSize := fs.Int("batch-size", "-", 1000, "batches: jobs per batch")
	concurrency := fs.Int("concurrency", "-", 2000, "jobs the node runs at once")
	claimBatch := fs.Int("claim-batch", "-", 1000, "most jobs one claim takes")
	nodes := fs.Int("nodes", "-", 3, "idle: nodes to run")
	rate := fs.Int("rate", "-", 0, "latency (default 100), fairness (default 20), cost (default 600), soak (default 80% of capacity), pressure idle-in-tx and readers (default 50% of capacity), pressure backend-kill and restart (default 100): jobs per second")
	entries := fs.Int("entries", "-", 10, "cron: entries")
	limit := fs.Int("limit", "-", 50, "limits: the binding limit's concurrency")
	hold := fs.Duration("hold", "-", 100*time.Millisecond, "limits: how long each job runs under the binding limit")
	sequences := fs.Int("sequences", "-", 10000, "sequences: how many sequences")
	perSequence := fs.Int("per-sequence", "-", 100, "sequences: jobs per sequence")
	workers := fs.Int("workers", "-", 8, "remote: remote workers (each a goroutine calling the API over HTTP)")
	duration := fs.Duration("duration", "-", 30*time.Second, "continuous, latency, cron, idle, pressure, soak: how long to measure (pressure idle-in-tx and readers: --clean and --hold-for included)")
	killEvery := fs.Duration("kill-every", "-", 250*time.Millisecond, "pressure backend-kill: how often the node's connections are terminated")
	clean := fs.Duration("clean", "-", 10*time.Second, "pressure idle-in-tx, readers, restart: the clean phase before the pressure (a multiple of --sample)")
	holdFor := fs.Duration("hold-for", "-", 0, "pressure idle-in-tx, readers: how long the pressure lasts, a multiple of --sample (default: to the end of --duration); restart: the first phase after it (default one sample)")
	readers := fs.Int("readers", "-", 2, "pressure readers: reading sessions")
	readFor := fs.Duration("read-for", "-", 5*time.Second, "pressure readers: how long each reader's transaction lasts at least")
	fetchCooldown := fs.Duration("fetch-cooldown", "-", 0, "the node's least time between two claims of a queue (default: the node's, 2ms)")
	trickleCooldown := fs.Duration("trickle-cooldown", "-", 0, "the node's least time between a claim that found fewer jobs than it had slots for and the next (default: the node's, 8ms; negative: none)")
	vacuumAt := fs.Int("vacuum-threshold", "-", -1, "the node's dead rows in gaffer.jobs before its leader vacuums the table itself (default: the node's, 20000; 0: leave it to autovacuum)")
	retention := fs.Duration("retention", "-", 5*time.Minute, "soak: how long finished jobs are kept")
	sample := fs.Duration("sample", "-", 0, "soak (default 1m), pressure idle-in-tx and readers (default 10s), pressure restart (default 1s): the sampling interval")
	svg := fs.String("svg", "-", "", "soak: write a plot of the series to this SVG file")
	replot := fs.String("replot", "-", "", "soak: run nothing; redraw --svg from this earlier --json result")
	warmup := fs.Duration("warmup", "-", 5*time.Second, "continuous: time before measuring")
	asJSON := fs.Bool("json", "-", false, "print the result as JSON")
	cpuProfile := fs.String("cpuprofile", "-", "", "write a CPU profile of the measured phase to this file")
	pgStats := fs.Bool("pg-statements", "-", false, "throwaway server only: print where PostgreSQL spent its time")
	pgSettings := fs.String("pg-settings", "-", "", "throwaway server only: extra settings, name=value[,name=value...] (e.g. autovacuum_naptime=10s)")
	fs.choices = bench.Modes()
	if err := fs.parse(args); err != nil {
		return err
	}
	ok := slices.Contains(fs.choices, fs.Arg(0))
	want := 1
	if fs.Arg(0) == "pressure" {
		want = 2 // pressure KIND
	}
	if fs.NArg() != want || !ok {
		fs.Usage()
		return usageError("bench needs a mode: backlog, continuous, latency, cron, idle, enqueue, dashboard, fairness, limits, pressure backend-kill|idle-in-tx|readers|restart, remote, soak, cost, sequences or batches")
	}
	if fs.Arg(0) == "pressure" && !slices.Contains([]string{"backend-kill", "idle-in-tx", "readers", "restart"}, fs.Arg(1)) {
		return usageError(fmt.Sprintf("bench pressure %q: the pressures are backend-kill, idle-in-tx, readers and restart", fs.Arg(1)))
	}
	restart := fs.Arg(0) == "pressure" && fs.Arg(1) == "restart"
	if restart && *dbURL != "" {
		return usageError("bench pressure restart restarts the bench's own throwaway PostgreSQL: leave out --database-url")
	}
	if *sample == 0 {
		*sample = time.Minute
		switch {
		case restart:
			*sample = time.Second
		case fs.Arg(0) == "pressure":
			*sample = 10 * time.Second
		}
	}
	if restart && *holdFor == 0 {
		*holdFor = *sample
	}
	// pressure restart's default is latency's 100 jobs/s, not a share of
	// a capacity measured first.
	rateSet := *rate != 0 || restart
	if *rate == 0 {
		*rate = map[string]int{"fairness": 20, "cost": 600}[fs.Arg(0)]
		if *rate == 0 {
			*rate = 100
		}
	}
	// The node's VacuumThreshold: 0 is its default, negative none.
	var vacuumThreshold int64
	switch {
	case *vacuumAt == 0:
		vacuumThreshold = -1
	case *vacuumAt > 0:
		vacuumThreshold = int64(*vacuumAt)
	case *vacuumAt < -1:
		return usageError(fmt.Sprintf("--vacuum-threshold must be a positive count of dead rows, or 0 to leave vacuum to autovacuum (unset: the node's default), got %d", *vacuumAt))
	}
	o := bench.Options{Jobs: *jobs, Batch: *batch, Concurrency: *concurrency, ClaimBatch: *claimBatch, Nodes: *nodes, Rate: *rate,
		Entries: *entries, Sequences: *sequences, PerSequence: *perSequence, Batches: *batches, BatchSize: *batchSize, Duration: *duration, Warmup: *warmup, Limit: *limit, Hold: *hold, Workers: *workers,
		Retention: *retention, Sample: *sample, RateSet: rateSet, KillEvery: *killEvery, FetchCooldown: *fetchCooldown, TrickleCooldown: *trickleCooldown,
		VacuumThreshold: vacuumThreshold, Pressure: fs.Arg(1), Clean: *clean, HoldFor: *holdFor, Readers: *readers, ReadFor: *readFor,
		Kinds: func(ctx context.Context, n *gaffer.Node, dbURL string, own ...string) error {
			hooks, err := newWebhooks(ctx, outbound{}, nil, dbURL, own...)
			if err != nil {
				return err
			}
			registerBuiltinKinds(n, hooks)
			return nil
		}}
	if o.Retention <= 0 || o.Sample <= 0 {
		return usageError("--retention and --sample must be positive")
	}
	if fs.Arg(0) != "soak" {
		o.Retention = 0 // the node's default: nothing is deleted while measuring
	}
	if o.Limit < 1 || o.Hold <= 0 {
		return usageError("--limit and --hold must be positive")
	}
	for name, v := range map[string]int{"jobs": o.Jobs, "batch": o.Batch, "concurrency": o.Concurrency, "claim-batch": o.ClaimBatch, "nodes": o.Nodes, "rate": o.Rate, "entries": o.Entries, "workers": o.Workers,
		"sequences": o.Sequences, "per-sequence": o.PerSequence, "batches": o.Batches, "batch-size": o.BatchSize, "readers": o.Readers} {
		if v < 1 {
			return usageError(fmt.Sprintf("--%s must be positive", name))
		}
	}
	if o.KillEvery <= 0 || o.ReadFor <= 0 {
		return usageError("--kill-every and --read-for must be positive")
	}
	if fs.Arg(1) == "idle-in-tx" || fs.Arg(1) == "readers" || restart {
		if o.Clean < o.Sample || o.Clean%o.Sample != 0 || o.HoldFor < 0 || o.HoldFor%o.Sample != 0 {
			return usageError("--clean must be a positive multiple of --sample, and --hold-for a multiple of it")
		}
		if o.Clean+o.HoldFor >= o.Duration || o.Duration%o.Sample != 0 {
			return usageError("--duration must be a multiple of --sample and outlast --clean and --hold-for")
		}
	}
	if o.Duration <= 0 || o.Warmup < 0 || o.FetchCooldown < 0 {
		return usageError("--duration must be positive, and --warmup and --fetch-cooldown not negative")
	}
	if *replot != "" {
		if *svg == "" {
			return usageError("--replot needs --svg")
		}
		return bench.Replot(m.Stdout, *replot, *svg)
	}
	tp, stopTracing, err := startTracing(ctx, hclog.New(&hclog.LoggerOptions{Name: "bench", Output: m.Stderr}))
	if err != nil {
		return err
	}
	defer stopTracing()
	o.Tracer = tp.TracerProvider
	o.URL = *dbURL
	if o.URL == "" {
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
		o.URL = srv.URL()
		if restart {
			o.Restart = srv.Restart
		}
	}
	st, err := store.Open(ctx, o.URL, 8)
	if err != nil {
		return err
	}
	defer st.Close()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	res, err := bench.Run(ctx, st, fs.Arg(0), o)
	if err != nil {
		return err
	}
	if *pgStats && *dbURL == "" {
		if err := bench.PrintStatements(ctx, m.Stdout, st); err != nil {
			return err
		}
	}
	if *svg != "" && res.Soak != nil {
		f, err := os.Create(*svg)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := bench.WriteSVG(f, res, o.Retention); err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(m.Stdout).Encode(res)
	}
	return bench.Print(m.Stdout, res)
}
