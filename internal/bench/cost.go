package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// costResult is what a fixed rate of jobs cost, worked by a Gaffer node
// and, on the same table, by the plainest queue there is.
type costResult struct {
	Rate   int       `json:"rate"`
	Gaffer costPhase `json:"gaffer"`
	// Plain is the baseline: one loop claims as many due jobs as there
	// are free workers with SELECT … FOR UPDATE SKIP LOCKED, at once again
	// while it finds any and every plainPoll while it finds none, and the
	// workers complete each — no fairness, no limits, no leases renewed,
	// no notifications heard.
	Plain costPhase `json:"plain_skip_locked"`
	// Ratio is Gaffer's PostgreSQL CPU per job over the baseline's.
	Ratio float64 `json:"pg_cpu_ratio"`
}

// costPhase is one worker's figures over the measure.
type costPhase struct {
	Jobs int `json:"jobs"`
	// PostgresMS and ProcessMS are CPU milliseconds per 1,000 jobs: the
	// PostgreSQL instance's (its postmaster's accounting, exited
	// backends included) and this process's (the workers and the
	// enqueuers, which are the same in both phases).
	PostgresMS float64    `json:"postgres_cpu_ms_per_1000_jobs"`
	ProcessMS  float64    `json:"process_cpu_ms_per_1000_jobs"`
	Latency    *latencies `json:"latency"`
}

// plainPoll is how often the baseline looks for work while it finds none.
const plainPoll = 5 * time.Millisecond

// costEnqueuers enqueue the paced jobs side by side: one connection's
// commit latency would cap the rate below what is asked.
const costEnqueuers = 8

// benchCost enqueues jobs at o.Rate for o.Duration while a Gaffer node
// with o.Concurrency slots works them, then again while the baseline's
// o.Concurrency workers do, and compares what each cost PostgreSQL.
func benchCost(ctx context.Context, st *store.Store, o Options, r *Result) error {
	if postmaster == 0 {
		return errors.New("bench cost reads PostgreSQL's CPU from its processes: it needs a server on this machine")
	}
	c := &costResult{Rate: o.Rate}
	r.Cost = c
	if err := costHistory(ctx, st); err != nil {
		return err
	}
	var err error
	if c.Gaffer, err = costOfGaffer(ctx, st, o); err != nil {
		return fmt.Errorf("gaffer: %w", err)
	}
	if _, err := st.DeleteQueueJobs(ctx, Queue); err != nil {
		return err
	}
	if err := costSettle(ctx, st); err != nil {
		return err
	}
	if c.Plain, err = costOfPlain(ctx, st, o); err != nil {
		return fmt.Errorf("plain skip locked: %w", err)
	}
	if c.Plain.PostgresMS > 0 {
		c.Ratio = c.Gaffer.PostgresMS / c.Plain.PostgresMS
	}
	r.Jobs, r.Seconds = c.Gaffer.Jobs, o.Duration.Seconds()
	r.JobsPerSec = float64(c.Gaffer.Jobs) / o.Duration.Seconds()
	r.Concurrency = o.Concurrency
	return nil
}

// costFinished is how many finished jobs the table holds before either
// phase, as retention keeps them in a running system.
const costFinished = 100_000

// costHistory fills the table with costFinished finished jobs (of a
// queue of their own, which neither phase reads) and settles it: both
// phases start from a table of a running system, not an empty one. On
// an empty table the statements' cached plans are made for a table of
// a few rows (a sequential scan is then the cheapest way to find a row)
// and kept while the table grows, until autovacuum next analyzes it: a
// minute of a new database, and what a 20-second phase would measure.
func costHistory(ctx context.Context, st *store.Store) error {
	if _, err := st.Pool().Exec(ctx, `
		INSERT INTO gaffer.jobs (kind, queue, args, state, attempt, attempted_at, finalized_at)
		SELECT 'bench.cost', $1, '{}', 'completed', 1, now(), now() FROM generate_series(1, $2)`,
		Queue+".finished", costFinished); err != nil {
		return fmt.Errorf("fill the table: %w", err)
	}
	return costSettle(ctx, st)
}

// costSettle vacuums and analyzes the job table, as autovacuum has in a
// running system, so that each phase plans against what the table holds.
func costSettle(ctx context.Context, st *store.Store) error {
	if _, err := st.Pool().Exec(ctx, `VACUUM ANALYZE gaffer.jobs`); err != nil {
		return fmt.Errorf("vacuum the table: %w", err)
	}
	return nil
}

// starts records when each job's work began, by id.
type starts struct {
	mu sync.Mutex
	at map[int64]time.Time
}

func (s *starts) mark(id int64) {
	now := time.Now()
	s.mu.Lock()
	s.at[id] = now
	s.mu.Unlock()
}

func (s *starts) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

func costOfGaffer(ctx context.Context, st *store.Store, o Options) (costPhase, error) {
	s := &starts{at: map[int64]time.Time{}}
	node, err := benchNode(ctx, o.URL, o, nil, func(n *gaffer.Node) {
		n.HandleFunc("bench.cost", func(ctx context.Context, j *job.Job) error {
			s.mark(j.ID)
			return nil
		})
	})
	if err != nil {
		return costPhase{}, err
	}
	if err := node.Start(ctx); err != nil {
		return costPhase{}, err
	}
	defer node.Stop(context.Background())
	time.Sleep(time.Second) // the node's first, immediate poll has passed
	return measureCost(ctx, st, o, s)
}

func costOfPlain(ctx context.Context, st *store.Store, o Options) (costPhase, error) {
	s := &starts{at: map[int64]time.Time{}}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, o.Concurrency+1)
	work := make(chan int64, o.Concurrency)
	free := make(chan struct{}, o.Concurrency) // a token per idle worker
	for range o.Concurrency {
		free <- struct{}{}
		wg.Go(func() {
			for id := range work {
				s.mark(id)
				if _, err := st.Pool().Exec(wctx, `
					UPDATE gaffer.jobs SET state = 'completed', finalized_at = now(), lease_expires_at = NULL
					WHERE id = $1`, id); err != nil && wctx.Err() == nil {
					errs <- err
				}
				free <- struct{}{}
			}
		})
	}
	wg.Go(func() {
		defer close(work)
		if err := plainClaimer(wctx, st, free, work); err != nil && wctx.Err() == nil {
			errs <- err
		}
	})
	defer func() { stop(); wg.Wait() }()
	ph, err := measureCost(ctx, st, o, s)
	select {
	case werr := <-errs:
		return ph, werr
	default:
	}
	return ph, err
}

// plainClaimer is the baseline's claim: the oldest due jobs of the queue,
// as many as there are idle workers, handed to them. The writes keep the
// table's rules (a running job holds a lease), so the row and every
// index change as they do under Gaffer.
func plainClaimer(ctx context.Context, st *store.Store, free chan struct{}, work chan<- int64) error {
	for ctx.Err() == nil {
		n := 0
		select { // at least one idle worker, then every other one
		case <-free:
			n = 1
		case <-ctx.Done():
			return nil
		}
	more:
		for {
			select {
			case <-free:
				n++
			default:
				break more
			}
		}
		rows, err := st.Pool().Query(ctx, `
			UPDATE gaffer.jobs j
			SET state = 'running', attempt = j.attempt + 1, lease_token = 1, lease_expires_at = now() + interval '1 minute',
			    node = 'plain', attempted_at = now()
			WHERE j.id IN (SELECT id FROM gaffer.jobs
			               WHERE queue = $1 AND state IN ('pending', 'retrying') AND due
			               ORDER BY queue, tenant COLLATE "C", fairness_key COLLATE "C", priority, run_at, id
			               LIMIT $2 FOR UPDATE SKIP LOCKED)
			RETURNING j.id`, Queue, n)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		for _, id := range ids {
			work <- id
		}
		for range n - len(ids) {
			free <- struct{}{} // the workers it found nothing for
		}
		if len(ids) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(plainPoll):
			}
		}
	}
	return nil
}

// measureCost enqueues at o.Rate for o.Duration, costEnqueuers side by
// side, waits for the jobs to start, and reads the CPU both sides used
// and each job's enqueue → start.
func measureCost(ctx context.Context, st *store.Store, o Options, s *starts) (costPhase, error) {
	client := job.NewClient(st.Pool(), nil)
	var mu sync.Mutex
	enqueued := map[int64]time.Time{}
	pg0, err := pgserver.CPU(postmaster)
	if err != nil {
		return costPhase{}, err
	}
	self0 := selfCPU()
	ticks := make(chan time.Time)
	var wg sync.WaitGroup
	errs := make(chan error, costEnqueuers)
	for range costEnqueuers {
		wg.Go(func() {
			for t0 := range ticks {
				res, err := client.Enqueue(ctx, job.Request{Kind: "bench.cost", Queue: Queue})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				enqueued[res.Job.ID] = t0
				mu.Unlock()
			}
		})
	}
	tick := time.NewTicker(time.Second / time.Duration(o.Rate))
	for end := time.Now().Add(o.Duration); time.Now().Before(end); {
		t := <-tick.C
		select {
		case ticks <- t:
		case err := <-errs:
			tick.Stop()
			close(ticks)
			wg.Wait()
			return costPhase{}, err
		}
	}
	tick.Stop()
	close(ticks)
	wg.Wait()
	for wait := time.Now().Add(10 * time.Second); s.count() < len(enqueued) && time.Now().Before(wait); {
		time.Sleep(20 * time.Millisecond)
	}
	// The work of the last jobs (their completions) settles.
	time.Sleep(200 * time.Millisecond)
	pg1, err := pgserver.CPU(postmaster)
	if err != nil {
		return costPhase{}, err
	}
	self1 := selfCPU()
	s.mu.Lock()
	defer s.mu.Unlock()
	var ms []float64
	for id, t0 := range enqueued {
		if t1, ok := s.at[id]; ok {
			ms = append(ms, float64(t1.Sub(t0).Microseconds())/1000)
		}
	}
	if len(ms) < len(enqueued) {
		return costPhase{}, fmt.Errorf("%d of %d jobs did not start within 10 seconds of the end", len(enqueued)-len(ms), len(enqueued))
	}
	if len(ms) == 0 {
		return costPhase{}, errors.New("no job was enqueued")
	}
	per := 1000 / float64(len(ms))
	return costPhase{Jobs: len(ms), Latency: percentiles(ms),
		PostgresMS: float64((pg1 - pg0).Microseconds()) / 1000 * per,
		ProcessMS:  float64((self1 - self0).Microseconds()) / 1000 * per}, nil
}

func printCost(w io.Writer, r Result) {
	c := r.Cost
	fmt.Fprintf(w, "%d jobs/s for %.0fs, %d slots (enqueue → start; CPU ms per 1,000 jobs):\n", c.Rate, r.Seconds, r.Concurrency)
	for _, p := range []struct {
		name string
		ph   costPhase
	}{{"gaffer", c.Gaffer}, {"plain SKIP LOCKED", c.Plain}} {
		fmt.Fprintf(w, "  %-18s p50 %6.2fms  p99 %7.2fms  postgres %7.1f ms  this process %7.1f ms\n",
			p.name, p.ph.Latency.P50, p.ph.Latency.P99, p.ph.PostgresMS, p.ph.ProcessMS)
	}
	fmt.Fprintf(w, "postgres CPU per job: gaffer %.2f× the plain loop's\n", c.Ratio)
}
