package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

const benchQueue = "bench"

type benchResult struct {
	Mode          string  `json:"mode"`
	Jobs          int     `json:"jobs"`
	EnqueueJobsPS float64 `json:"enqueue_jobs_per_sec"`
	WorkJobsPS    float64 `json:"work_jobs_per_sec"`
	WorkSeconds   float64 `json:"work_seconds"`
	Concurrency   int     `json:"concurrency"`
	GoVersion     string  `json:"go_version"`
	CPUs          int     `json:"cpus"`
}

func (m *Main) runBench(ctx context.Context, args []string) error {
	fs := m.newFlagSet("bench", "bench backlog|enqueue [flags]\n\n  backlog  insert --jobs no-op jobs, then measure one node working them off\n  enqueue  measure bulk enqueue (COPY) only\n\nWithout --database-url a throwaway PostgreSQL is started (fsync on,\nshared_buffers=1GB). Jobs go to the queue \"bench\", which must be empty.")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "PostgreSQL to measure (default: a throwaway server)")
	jobs := fs.Int("jobs", "", 100000, "jobs to insert")
	batch := fs.Int("batch", "", 10000, "jobs per enqueue call")
	concurrency := fs.Int("concurrency", "", 1000, "jobs the node runs at once")
	claimBatch := fs.Int("claim-batch", "", 500, "most jobs one claim takes")
	asJSON := fs.Bool("json", "", false, "print the result as JSON")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "backlog" && fs.Arg(0) != "enqueue") {
		fs.Usage()
		return usageError("bench needs a mode: backlog or enqueue")
	}
	if *jobs < 1 || *batch < 1 || *concurrency < 1 || *claimBatch < 1 {
		return usageError("--jobs, --batch, --concurrency and --claim-batch must be positive")
	}
	url := *dbURL
	if url == "" {
		srv, err := pgserver.Start(ctx, pgserver.Config{Durable: true, Settings: map[string]string{"shared_buffers": "1GB"}})
		if err != nil {
			return err
		}
		defer srv.Stop()
		url = srv.URL()
	}
	st, err := store.Open(ctx, url, 8)
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

	res := benchResult{Mode: fs.Arg(0), Jobs: *jobs, Concurrency: *concurrency, GoVersion: runtime.Version(), CPUs: runtime.NumCPU()}
	client := job.NewClient(st, nil)
	reqs := make([]job.Request, *batch)
	for i := range reqs {
		reqs[i] = job.Request{Kind: "noop", Queue: benchQueue, Args: json.RawMessage(`{}`)}
	}
	start := time.Now()
	for left := *jobs; left > 0; left -= *batch {
		if _, err := client.EnqueueMany(ctx, reqs[:min(left, *batch)]); err != nil {
			return err
		}
	}
	res.EnqueueJobsPS = float64(*jobs) / time.Since(start).Seconds()

	if res.Mode == "backlog" {
		if err := benchWork(ctx, url, *jobs, *concurrency, *claimBatch, &res); err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(m.Stdout).Encode(res)
	}
	fmt.Fprintf(m.Stdout, "bulk enqueue: %d jobs at %.0f jobs/s\n", res.Jobs, res.EnqueueJobsPS)
	if res.Mode == "backlog" {
		fmt.Fprintf(m.Stdout, "work backlog: %d jobs in %.2fs = %.0f jobs/s (concurrency %d)\n", res.Jobs, res.WorkSeconds, res.WorkJobsPS, res.Concurrency)
	}
	return nil
}

// benchWork starts one node on the bench queue and times it working off
// the backlog: from start until every job's completion is accepted.
func benchWork(ctx context.Context, url string, jobs, concurrency, claimBatch int, res *benchResult) error {
	reg := prometheus.NewRegistry()
	node, err := gaffer.NewNode(ctx, gaffer.Config{
		DatabaseURL: url, ID: "bench", Queues: map[string]int{benchQueue: concurrency}, MaxConns: 8,
		ClaimBatch: claimBatch, Registerer: reg, Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn}),
	})
	if err != nil {
		return err
	}
	registerBuiltinKinds(node, "")
	start := time.Now()
	if err := node.Start(ctx); err != nil {
		return err
	}
	defer node.Stop(context.Background())
	for {
		done, err := completedCount(reg)
		if err != nil {
			return err
		}
		if done >= float64(jobs) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	res.WorkSeconds = time.Since(start).Seconds()
	res.WorkJobsPS = float64(jobs) / res.WorkSeconds
	return nil
}

func completedCount(reg *prometheus.Registry) (float64, error) {
	families, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	i := sort.Search(len(families), func(i int) bool { return families[i].GetName() >= "gaffer_job_completed_total" })
	if i == len(families) || families[i].GetName() != "gaffer_job_completed_total" {
		return 0, nil
	}
	total := 0.0
	for _, mf := range families[i].GetMetric() {
		total += mf.GetCounter().GetValue()
	}
	return total, nil
}
