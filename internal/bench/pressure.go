package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/store"
)

// pressureResult is what bench pressure did to the node while it measured.
type pressureResult struct {
	Kind string `json:"kind"`
	// backend-kill: how often the node's connections were terminated,
	// and how many were.
	Every      string `json:"every,omitempty"`
	Terminated int    `json:"terminated,omitempty"`
	// idle-in-tx and readers: the load's rate (Capacity: the bench
	// continuous it is half of, when --rate was not given), the series
	// sampled every Sample, and when the pressure began and ended, in
	// seconds since the measure began (Until is the measure's end when it
	// was not released).
	Rate     int          `json:"rate,omitempty"`
	Capacity float64      `json:"measured_capacity,omitempty"`
	Sample   string       `json:"sample,omitempty"`
	Samples  []soakSample `json:"samples,omitempty"`
	From     float64      `json:"pressure_from_s,omitempty"`
	Until    float64      `json:"pressure_until_s,omitempty"`
	Released bool         `json:"released,omitempty"`
	// Seen counts the samples under pressure at which pg_stat_activity
	// showed it in place: the holder idle in transaction with its xid and
	// snapshot, or a reader with a snapshot.
	Seen int `json:"samples_seen_in_place,omitempty"`
	// idle-in-tx: the transaction id the holder took.
	HeldXID int64 `json:"held_xid,omitempty"`
	// readers: the readers, their transactions and their scans of the job
	// tables (each scan reads gaffer.jobs and gaffer.dlq whole).
	Readers      int `json:"readers,omitempty"`
	Transactions int `json:"reader_transactions,omitempty"`
	Scans        int `json:"scans,omitempty"`
	// The figures of the phases: before the pressure, under it, after its
	// release.
	Before *phaseFigures `json:"before,omitempty"`
	Under  *phaseFigures `json:"under_pressure,omitempty"`
	After  *phaseFigures `json:"after_release,omitempty"`
	// Recovered is the time from the release to the end of the first
	// interval from which on every interval's p99 is within the clean
	// level, the worst interval p99 before the pressure; nil when not
	// back by the end.
	Recovered *float64 `json:"recovered_after_s,omitempty"`
	// gaffer.jobs and its indexes when the load began and when it ended.
	SizeStart *jobsSize `json:"jobs_size_start,omitempty"`
	SizeEnd   *jobsSize `json:"jobs_size_end,omitempty"`
	// idle-in-tx, readers and restart: the jobs enqueued, and how many of
	// them had not started 11 s after the load ended (the node fell
	// behind it; the latencies are of the jobs that started).
	Sent      int `json:"sent,omitempty"`
	Unstarted int `json:"unstarted_at_end"`
	// restart: how long PostgreSQL took to accept connections again, and
	// the enqueues that failed meanwhile (each tried again 10 ms later:
	// one that had committed, its answer lost, is then enqueued twice,
	// and both jobs are measured).
	ReadyAfter      float64 `json:"server_ready_after_s,omitempty"`
	EnqueueFailures int     `json:"enqueue_failures,omitempty"`
}

// phaseFigures are a phase's throughput (completions) and enqueue →
// start of the jobs that started in it, and its worst interval's p99.
type phaseFigures struct {
	Seconds    float64 `json:"seconds"`
	JobsPerSec float64 `json:"jobs_per_sec"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
	WorstP99   float64 `json:"worst_interval_p99_ms"`
}

// jobsSize is gaffer.jobs' size: table (its TOAST included) and indexes.
type jobsSize struct {
	TotalMB  float64 `json:"total_mb"`
	TableMB  float64 `json:"table_mb"`
	IndexMB  float64 `json:"index_mb"`
	LiveRows int64   `json:"live_rows"`
	DeadRows int64   `json:"dead_rows"`
}

func jobsSizeOf(ctx context.Context, st *store.Store) (*jobsSize, error) {
	z, err := tableSize(ctx, st)
	if err != nil {
		return nil, err
	}
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	return &jobsSize{TotalMB: mb(z.TableBytes + z.IndexBytes), TableMB: mb(z.TableBytes), IndexMB: mb(z.IndexBytes),
		LiveRows: z.LiveRows, DeadRows: z.DeadRows}, nil
}

// The application_name of bench's own sessions in pg_stat_activity.
const (
	benchNodeApp   = "gaffer-bench-node"
	benchHolderApp = "gaffer-bench-holder"
	benchReaderApp = "gaffer-bench-reader"
)

// benchPressure measures pickup under the pressure o.Pressure names.
func benchPressure(ctx context.Context, st *store.Store, o Options, r *Result) error {
	switch o.Pressure {
	case "", "backend-kill":
		return benchBackendKill(ctx, st, o, r)
	case "idle-in-tx":
		return measurePressure(ctx, st, o, r, &holder{url: o.URL})
	case "readers":
		return measurePressure(ctx, st, o, r, &readers{url: o.URL, n: o.Readers, readFor: o.ReadFor})
	case "restart":
		if o.Restart == nil {
			return fmt.Errorf("bench pressure restart restarts the bench's own throwaway PostgreSQL: run it without --database-url")
		}
		return measurePressure(ctx, st, o, r, &restarter{restart: o.Restart})
	}
	return fmt.Errorf("no pressure %q: backend-kill, idle-in-tx, readers or restart", o.Pressure)
}

// benchBackendKill is bench latency's load while PostgreSQL terminates
// every connection of the node (its pool, its lease pool, its LISTEN)
// every o.KillEvery: what a pooler recycling server connections, or an
// operator's pg_terminate_backend, does to it. The enqueuing client's
// connections are spared.
func benchBackendKill(ctx context.Context, st *store.Store, o Options, r *Result) error {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Errorf("bench pressure needs a postgres:// URL to name the node's connections")
	}
	q := u.Query()
	q.Set("application_name", benchNodeApp)
	u.RawQuery = q.Encode()
	p := &pressureResult{Kind: "backend-kill", Every: o.KillEvery.String()}
	r.Pressure = p
	return measureLatency(ctx, st, o, r, u.String(), func(ctx context.Context) {
		tick := time.NewTicker(o.KillEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var n int
			if err := st.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name = $1 AND datname = current_database() AND pid <> pg_backend_pid()`, benchNodeApp).Scan(&n); err == nil {
				p.Terminated += n
			}
		}
	})
}

// pressure is what idle-in-tx and readers do to the database beside the
// load: begun, checked at the end of each interval it lasts, ended.
type pressure interface {
	kind() string
	start(ctx context.Context, p *pressureResult) error
	// inPlace says whether pg_stat_activity shows the pressure applied.
	inPlace(ctx context.Context, st *store.Store) (bool, error)
	stop(p *pressureResult) error
}

// measurePressure puts the load on a node for o.Duration (at o.Rate, or
// half a capacity it first measures), sampled every o.Sample, and applies
// pr from o.Clean on until o.HoldFor later (0: to the end).
func measurePressure(ctx context.Context, st *store.Store, o Options, r *Result, pr pressure) (err error) {
	p := &pressureResult{Kind: pr.kind(), Rate: o.Rate, Sample: o.Sample.String()}
	r.Pressure = p
	intervals, from := int(o.Duration/o.Sample), int(o.Clean/o.Sample)
	until := intervals
	if o.HoldFor > 0 {
		until = from + int(o.HoldFor/o.Sample)
	}
	if from < 1 || until > intervals || until <= from {
		return fmt.Errorf("bench pressure %s: the clean phase (%s) and the pressure (%s) must each last at least one sample (%s), and fit in the measure (%s)",
			pr.kind(), o.Clean, o.HoldFor, o.Sample, o.Duration)
	}
	if !o.RateSet {
		if p.Capacity, p.Rate, err = shareOfCapacity(ctx, st, o, 0.5); err != nil {
			return err
		}
	}
	if p.SizeStart, err = jobsSizeOf(ctx, st); err != nil {
		return err
	}
	l, err := startLoad(ctx, st, o, o.URL, p.Rate, o.Sample)
	if err != nil {
		return err
	}
	defer l.stop()
	// Through a restart the enqueuing tries again, and a sample records no
	// size, while the server is down: the outage is the figure.
	l.outage.Store(pr.kind() == "restart")
	cpu := startCPU()
	applied := false
	defer func() {
		if applied {
			err = errors.Join(err, pr.stop(p))
		}
	}()
	var phases [3][]float64 // before, under, after: the latencies
	var spans [3][]soakSample
	tick := time.NewTicker(o.Sample)
	defer tick.Stop()
	for i := range intervals {
		switch i {
		case from:
			applied = true // stop ends what start began, if it fails midway
			if err := pr.start(ctx, p); err != nil {
				return fmt.Errorf("start %s: %w", pr.kind(), err)
			}
			p.From = (time.Duration(i) * o.Sample).Seconds()
		case until:
			applied = false
			if err := pr.stop(p); err != nil {
				return fmt.Errorf("end %s: %w", pr.kind(), err)
			}
			p.Released = true
		}
		if err := l.wait(ctx, tick.C); err != nil {
			return err
		}
		if applied {
			if ok, err := pr.inPlace(ctx, st); err != nil {
				return err
			} else if ok {
				p.Seen++
			}
		}
		s, ms, err := l.sample(ctx, st, i)
		if err != nil {
			return err
		}
		ph := 0
		if i >= until {
			ph = 2
		} else if i >= from {
			ph = 1
		}
		phases[ph] = append(phases[ph], ms...)
		spans[ph] = append(spans[ph], s)
		p.Samples = append(p.Samples, s)
	}
	p.Until = (time.Duration(until) * o.Sample).Seconds()
	// A node that fell behind is the figure, not a failure of the bench:
	// the intervals say when, and Unstarted how far.
	var rest []float64
	p.Sent, rest, p.Unstarted = l.finish()
	p.EnqueueFailures = l.failures()
	cpu.stop(r)
	if pr.kind() == "restart" {
		r.PostgresCores = 0 // its processes were replaced: not measured
	}
	if p.SizeEnd, err = jobsSizeOf(ctx, st); err != nil {
		return err
	}
	figures := func(ms []float64, ss []soakSample) *phaseFigures {
		if len(ss) == 0 {
			return nil
		}
		x := percentiles(ms)
		f := &phaseFigures{Seconds: float64(len(ss)) * o.Sample.Seconds(), P50: x.P50, P99: x.P99, Max: x.Max}
		for _, s := range ss {
			f.JobsPerSec += s.JobsPerSec / float64(len(ss))
			f.WorstP99 = max(f.WorstP99, s.P99)
		}
		return f
	}
	p.Before, p.Under, p.After = figures(phases[0], spans[0]), figures(phases[1], spans[1]), figures(phases[2], spans[2])
	if p.Released {
		p.Recovered = recovery(spans[2], p.Before.WorstP99, o.Sample)
	}
	all := append(append(append(phases[0], phases[1]...), phases[2]...), rest...)
	r.Latency = percentiles(all)
	r.Jobs, r.Seconds = len(all), o.Duration.Seconds()
	r.JobsPerSec = float64(len(all)) / o.Duration.Seconds()
	r.Concurrency, r.ClaimBatch = o.Concurrency, o.ClaimBatch
	return nil
}

// recovery is the time from the release to the end of the first of the
// intervals after it (after) from which on every p99 is at most clean;
// nil if the last is not.
func recovery(after []soakSample, clean float64, every time.Duration) *float64 {
	back := len(after)
	for back > 0 && after[back-1].P99 <= clean {
		back--
	}
	if back == len(after) {
		return nil
	}
	s := (time.Duration(back+1) * every).Seconds()
	return &s
}

// connectAs opens a session of its own on dbURL named app in
// pg_stat_activity.
func connectAs(ctx context.Context, dbURL, app string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = app
	return pgx.ConnectConfig(ctx, cfg)
}

// holder is idle-in-tx's pressure: a session of its own opens a
// REPEATABLE READ transaction, takes an xid and a snapshot (reading
// gaffer.jobs) and sits idle in it until released, holding back the
// horizon below which vacuum may remove dead rows.
type holder struct {
	url  string
	conn *pgx.Conn
	tx   pgx.Tx
}

func (h *holder) kind() string { return "idle-in-tx" }

func (h *holder) start(ctx context.Context, p *pressureResult) error {
	conn, err := connectAs(ctx, h.url, benchHolderApp)
	if err != nil {
		return err
	}
	h.conn = conn
	// A server's timeout would end the hold before its time.
	if _, err := conn.Exec(ctx, `SET idle_in_transaction_session_timeout = 0`); err != nil {
		return err
	}
	if h.tx, err = conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}); err != nil {
		return err
	}
	if err := h.tx.QueryRow(ctx, `SELECT txid_current()`).Scan(&p.HeldXID); err != nil {
		return err
	}
	var n int64
	return h.tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM gaffer.jobs LIMIT 1000) j`).Scan(&n)
}

func (h *holder) inPlace(ctx context.Context, st *store.Store) (bool, error) {
	var n int
	err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()
		AND state = 'idle in transaction' AND backend_xid IS NOT NULL AND backend_xmin IS NOT NULL`, benchHolderApp).Scan(&n)
	return n > 0, err
}

func (h *holder) stop(*pressureResult) error {
	ctx := context.Background()
	if h.conn == nil {
		return nil
	}
	var err error
	if h.tx != nil {
		err = h.tx.Rollback(ctx)
	}
	return errors.Join(err, h.conn.Close(ctx))
}

// restarter is the restart pressure: PostgreSQL stopped as a crash stops
// it (every session cut, recovery on start) and started again, beside
// the load. The restart runs in the background, so that the samples go
// on through it; it is in place until the server accepts connections.
type restarter struct {
	restart func(ctx context.Context) error
	began   time.Time
	done    chan struct{}
	err     error
	ready   time.Duration
}

func (rs *restarter) kind() string { return "restart" }

func (rs *restarter) start(ctx context.Context, p *pressureResult) error {
	rs.began, rs.done = time.Now(), make(chan struct{})
	go func() {
		defer close(rs.done)
		rs.err = rs.restart(ctx)
		rs.ready = time.Since(rs.began)
	}()
	return nil
}

func (rs *restarter) inPlace(context.Context, *store.Store) (bool, error) {
	select {
	case <-rs.done:
		return false, nil
	default:
		return true, nil
	}
}

func (rs *restarter) stop(p *pressureResult) error {
	if rs.done == nil {
		return nil
	}
	<-rs.done
	p.ReadyAfter = rs.ready.Seconds()
	if rs.err != nil {
		return fmt.Errorf("restart PostgreSQL: %w", rs.err)
	}
	return nil
}

// readers is the readers pressure: n sessions, each running REPEATABLE
// READ transactions one after another, each scanning the job tables
// again and again until it has lasted readFor — the analytics
// transactions a shared database also serves.
type readers struct {
	url     string
	n       int
	readFor time.Duration

	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	txs    int
	scans  int
	err    error
}

func (rd *readers) kind() string { return "readers" }

func (rd *readers) start(ctx context.Context, p *pressureResult) error {
	p.Readers = rd.n
	var conns []*pgx.Conn
	for range rd.n {
		conn, err := connectAs(ctx, rd.url, benchReaderApp)
		if err != nil {
			for _, c := range conns {
				c.Close(ctx)
			}
			return err
		}
		conns = append(conns, conn)
	}
	rctx, cancel := context.WithCancel(ctx)
	rd.cancel = cancel
	for _, conn := range conns {
		rd.wg.Go(func() {
			defer conn.Close(context.Background())
			if err := rd.read(rctx, conn); err != nil && rctx.Err() == nil {
				rd.mu.Lock()
				rd.err = errors.Join(rd.err, err)
				rd.mu.Unlock()
			}
		})
	}
	return nil
}

// read runs one reader's transactions until ctx ends.
func (rd *readers) read(ctx context.Context, conn *pgx.Conn) error {
	for ctx.Err() == nil {
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return err
		}
		for began := time.Now(); ; {
			var jobs, jobBytes, dlq, dlqBytes int64
			if err := tx.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM gaffer.jobs), (SELECT coalesce(sum(length(args::text)), 0) FROM gaffer.jobs),
				(SELECT count(*) FROM gaffer.dlq), (SELECT coalesce(sum(length(args::text)), 0) FROM gaffer.dlq)`).
				Scan(&jobs, &jobBytes, &dlq, &dlqBytes); err != nil {
				return err
			}
			rd.mu.Lock()
			rd.scans++
			rd.mu.Unlock()
			if time.Since(began) >= rd.readFor || ctx.Err() != nil {
				break
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		rd.mu.Lock()
		rd.txs++
		rd.mu.Unlock()
	}
	return nil
}

func (rd *readers) inPlace(ctx context.Context, st *store.Store) (bool, error) {
	var n int
	err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()
		AND backend_xmin IS NOT NULL`, benchReaderApp).Scan(&n)
	return n > 0, err
}

func (rd *readers) stop(p *pressureResult) error {
	if rd.cancel == nil {
		return nil
	}
	rd.cancel()
	rd.wg.Wait()
	rd.mu.Lock()
	defer rd.mu.Unlock()
	p.Transactions, p.Scans = rd.txs, rd.scans
	return rd.err
}

func printPressure(w io.Writer, r Result) {
	p := r.Pressure
	lat := func(l *latencies) string {
		return fmt.Sprintf("p50 %.2fms  p95 %.2fms  p99 %.2fms  max %.2fms", l.P50, l.P95, l.P99, l.Max)
	}
	if p.Kind == "backend-kill" {
		fmt.Fprintf(w, "%s: %d connections of the node terminated, every %s\n", p.Kind, p.Terminated, p.Every)
		fmt.Fprintf(w, "enqueue → handler start, %d jobs at %.0f/s: %s\n", r.Latency.N, r.JobsPerSec, lat(r.Latency))
		return
	}
	what := fmt.Sprintf("a transaction idle with xid %d and a REPEATABLE READ snapshot", p.HeldXID)
	switch p.Kind {
	case "readers":
		what = fmt.Sprintf("%d readers: %d REPEATABLE READ transactions, %d scans of gaffer.jobs and gaffer.dlq", p.Readers, p.Transactions, p.Scans)
	case "restart":
		what = fmt.Sprintf("PostgreSQL restarted as after a crash, accepting connections again %.2fs later (%d enqueues failed meanwhile and were tried again)",
			p.ReadyAfter, p.EnqueueFailures)
	}
	end := "to the end"
	if p.Released {
		end = fmt.Sprintf("to %.0fs", p.Until)
	}
	fmt.Fprintf(w, "%s: load at %d jobs/s; from %.0fs %s, %s (seen in place at %d samples)\n", p.Kind, p.Rate, p.From, end, what, p.Seen)
	fmt.Fprintln(w, "second   jobs/s   p50 ms   p99 ms   table+indexes MB   dead rows")
	for _, s := range p.Samples {
		mark := " "
		if sec := s.Minute * 60; sec > p.From && sec <= p.Until {
			mark = "*"
		}
		fmt.Fprintf(w, "%6.0f%s %7.0f  %7.1f  %7.1f   %8.1f + %6.1f    %d\n", s.Minute*60, mark, s.JobsPerSec, s.P50, s.P99, s.TableMB, s.IndexMB, s.DeadRows)
	}
	for _, ph := range []struct {
		name string
		f    *phaseFigures
	}{{"before", p.Before}, {"under pressure", p.Under}, {"after release", p.After}} {
		if ph.f != nil {
			fmt.Fprintf(w, "%-15s %4.0fs  %7.0f jobs/s  p50 %.1fms  p99 %.1fms  worst interval p99 %.1fms\n",
				ph.name, ph.f.Seconds, ph.f.JobsPerSec, ph.f.P50, ph.f.P99, ph.f.WorstP99)
		}
	}
	if p.Released {
		if p.Recovered != nil {
			fmt.Fprintf(w, "back to the clean level (p99 ≤ %.1fms in every interval on) %.0fs after the release\n", p.Before.WorstP99, *p.Recovered)
		} else {
			fmt.Fprintf(w, "not back to the clean level (p99 ≤ %.1fms) by the end\n", p.Before.WorstP99)
		}
	}
	fmt.Fprintf(w, "gaffer.jobs: %.1f MB (%d dead rows) at the start, %.1f MB (%d dead rows) at the end\n",
		p.SizeStart.TotalMB, p.SizeStart.DeadRows, p.SizeEnd.TotalMB, p.SizeEnd.DeadRows)
	fmt.Fprintf(w, "overall enqueue → handler start, %d jobs at %.0f/s: %s\n", r.Latency.N, r.JobsPerSec, lat(r.Latency))
	if p.Unstarted > 0 {
		fmt.Fprintf(w, "FELL BEHIND: %d of the %d jobs enqueued had not started 11s after the load ended (the figures above are of those that started)\n", p.Unstarted, p.Sent)
	}
}
