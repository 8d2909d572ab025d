package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/dlq"
	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/faultproxy"
	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/internal/store"
	"github.com/gafferhq/gaffer/internal/testnode"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/workflow"
)

// Fault kinds.
const (
	FaultKill          = "kill"           // SIGKILL a node; restart it a few seconds later
	FaultPause         = "pause"          // SIGSTOP a node (the leader half the time) past its session TTL, then SIGCONT
	FaultPauseWorker   = "pause-worker"   // SIGSTOP a node that is not the leader, past the job lease
	FaultPGBlackhole   = "pg-blackhole"   // a node's PostgreSQL connections hang
	FaultPGReset       = "pg-reset"       // a node's PostgreSQL connections are reset
	FaultPGLatency     = "pg-latency"     // a node's PostgreSQL traffic is delayed
	FaultEtcdBlackhole = "etcd-blackhole" // a node is cut off from every etcd member
	FaultPGRestart     = "pg-restart"     // PostgreSQL restarts immediately (a crash)
	FaultEtcdStop      = "etcd-stop"      // an etcd member (the leader half the time) stops, then returns
	FaultDrain         = "drain"          // a node is drained under load, leaves, and is started again
	FaultPGFailover    = "pg-failover"    // the PostgreSQL primary dies (Patroni and all); Patroni promotes the synchronous standby
)

// AllFaults is every fault kind the harness can inject.
var AllFaults = []string{FaultKill, FaultPause, FaultPGBlackhole, FaultPGReset, FaultPGLatency, FaultEtcdBlackhole, FaultPGRestart, FaultEtcdStop, FaultDrain}

// Profile sizes a run.
type Profile struct {
	Name          string
	Duration      time.Duration    // the fault phase
	FaultGap      [2]time.Duration // pause between faults, min and max
	JobsPerSec    int
	FailShare     float64 // share of jobs that fail for good into the DLQ
	JobMS         [2]int  // handler run time, min and max
	CronEntries   int
	WorkflowEvery time.Duration
	Faults        []string
	Settle        time.Duration // how long the healed cluster gets to finish
}

// Profiles by name.
var Profiles = map[string]Profile{
	"ci": {Name: "ci", Duration: 100 * time.Second, FaultGap: [2]time.Duration{2 * time.Second, 5 * time.Second},
		JobsPerSec: 40, FailShare: 0.1, JobMS: [2]int{10, 300}, CronEntries: 2, WorkflowEvery: 4 * time.Second,
		Faults: AllFaults, Settle: 2 * time.Minute},
	// long runs PostgreSQL as a Patroni primary and synchronous standby
	// (failover.go), so that it can fail over too.
	"long": {Name: "long", Duration: 30 * time.Minute, FaultGap: [2]time.Duration{2 * time.Second, 8 * time.Second},
		JobsPerSec: 60, FailShare: 0.1, JobMS: [2]int{10, 500}, CronEntries: 3, WorkflowEvery: 3 * time.Second,
		Faults: append(slices.Clip(AllFaults), FaultPGFailover), Settle: 3 * time.Minute},
	// mutation: stale workers galore, for the run whose nodes lack the
	// lease check. The load stays below what two nodes can work (12/s of
	// ~0.9 s jobs on 16 slots), so a paused node's jobs are taken over at
	// once and finished before it wakes: its late completions then land on
	// jobs another attempt owns or completed, which the checks can see.
	// With a backlog the jobs would wait, still retrying, for the stale
	// node to complete them unseen (CI failed that way once).
	"mutation": {Name: "mutation", Duration: 45 * time.Second, FaultGap: [2]time.Duration{time.Second, 2 * time.Second},
		JobsPerSec: 12, JobMS: [2]int{300, 1500}, CronEntries: 1, WorkflowEvery: 10 * time.Second,
		Faults: []string{FaultPauseWorker}, Settle: 2 * time.Minute},
}

// Options of a run.
type Options struct {
	Profile Profile
	Seed    int64
	Nodes   int           // default 3
	Lease   time.Duration // job lease, default 3s
	TTL     time.Duration // etcd session TTL, default 2s
}

// Report is what a run found.
type Report struct {
	Profile            string         `json:"profile"`
	Seed               int64          `json:"seed"`
	Jobs               int            `json:"jobs_accepted"`
	Completed          int            `json:"completed"`
	Failed             int            `json:"failed_into_dlq"`
	Replays            int            `json:"dlq_replays"`
	CronOccurrences    int            `json:"cron_occurrences"`
	Workflows          int            `json:"workflow_runs"`
	WorkflowSteps      int            `json:"workflow_steps"`
	Faults             map[string]int `json:"faults"`
	Violations         []string       `json:"violations"`
	Executions         int            `json:"handler_executions"`
	ExternalDuplicates int            `json:"external_effect_duplicates"`
	Recovery           []float64      `json:"recovery_seconds"`
	StaleRefused       int            `json:"stale_writes_refused"`
	FaultLog           []string       `json:"fault_log"`
}

type slot struct {
	id    string
	child *testnode.Child
	pg    pgPaths
	etcd  []*faultproxy.Proxy
	down  bool
}

type harness struct {
	t     *testing.T
	o     Options
	rng   *rand.Rand
	pg    *pgserver.Server // nil when patroni runs PostgreSQL
	db    *patroniDB       // with pg-failover among the faults
	url   string
	pool  *pgxpool.Pool
	etcd  *etcdserver.Cluster
	nodes []*slot
	admin *cluster.Admin

	mu        sync.Mutex
	accepted  []int64
	runs      []int64
	replays   map[int64]int64
	drains    []window
	recovery  []float64
	faults    map[string]int
	faultLog  []string
	cronNames []string
	start     time.Time
}

type window struct {
	node     string
	from, to time.Time
}

// Run runs the scenario of o and returns what it found; it fails t only
// on errors of the harness itself, not on violations.
func Run(t *testing.T, o Options) Report {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Lease == 0 {
		o.Lease = 3 * time.Second
	}
	if o.TTL == 0 {
		o.TTL = 2 * time.Second
	}
	h := &harness{t: t, o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 1)), replays: map[int64]int64{}, faults: map[string]int{}}
	h.setUp()
	ctx, stopLoad := context.WithCancel(context.Background())
	var load sync.WaitGroup
	for _, fn := range []func(context.Context){h.jobLoad, h.replayLoad, h.workflowLoad} {
		load.Add(1)
		go func() { defer load.Done(); fn(ctx) }()
	}
	h.start = time.Now()
	for time.Since(h.start) < o.Profile.Duration {
		gap := o.Profile.FaultGap[0] + time.Duration(h.rng.Int64N(int64(o.Profile.FaultGap[1]-o.Profile.FaultGap[0])+1))
		time.Sleep(gap)
		h.inject(o.Profile.Faults[h.rng.IntN(len(o.Profile.Faults))])
	}
	stopLoad()
	load.Wait()
	h.heal()
	return h.settleAndCheck()
}

func (h *harness) logf(format string, args ...any) {
	msg := fmt.Sprintf("%6.1fs ", time.Since(h.start).Seconds()) + fmt.Sprintf(format, args...)
	h.mu.Lock()
	h.faultLog = append(h.faultLog, msg)
	h.mu.Unlock()
	h.t.Log(msg)
}

func (h *harness) setUp() {
	t := h.t
	ctx := context.Background()
	var err error
	if h.etcd, err = etcdserver.StartCluster(3); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.etcd.Close)
	var pgAddrs []string
	if slices.Contains(h.o.Profile.Faults, FaultPGFailover) {
		h.db = startPatroni(t, h.etcd.Endpoints())
		h.url, pgAddrs = h.db.url(), h.db.addrs()
	} else {
		// Durable: PostgreSQL gets crash-restarted, and with synchronous_commit
		// off a crash loses commits it had already acknowledged (a first run
		// without it "lost" accepted jobs that way).
		if h.pg, err = pgserver.Start(ctx, pgserver.Config{Durable: true}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.pg.Stop() })
		h.url, pgAddrs = h.pg.URL(), []string{fmt.Sprintf("127.0.0.1:%d", h.pg.Port())}
	}
	if h.pool, err = pgxpool.New(ctx, h.url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.pool.Close)
	st := store.New(h.pool)
	if _, err := st.MigrateUp(ctx); err != nil {
		t.Fatal(err)
	}
	testnode.AuditCompletions(t, h.pool)
	if _, err := h.pool.Exec(ctx, `
		CREATE TABLE chaos_effects (job_id bigint, attempt int, node text, at timestamptz DEFAULT clock_timestamp());
		CREATE TABLE chaos_tx_effects (job_id bigint, attempt int, node text);
		CREATE TABLE test_claims (job_id bigint, node text, at timestamptz);
		CREATE FUNCTION test_claim_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO test_claims VALUES (NEW.id, NEW.node, NEW.attempted_at); RETURN NEW; END $$;
		CREATE TRIGGER test_claim_audit AFTER UPDATE ON gaffer.jobs FOR EACH ROW
			WHEN (NEW.state = 'running' AND OLD.state IS DISTINCT FROM 'running') EXECUTE FUNCTION test_claim_audit();`); err != nil {
		t.Fatal(err)
	}
	h.admin = cluster.NewAdmin(h.pool)
	for i := range h.o.Nodes {
		s := &slot{id: fmt.Sprintf("chaos-%d", i+1)}
		for _, addr := range pgAddrs {
			p, err := faultproxy.Start(addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			s.pg = append(s.pg, p)
		}
		for _, ep := range h.etcd.Endpoints() {
			p, err := faultproxy.Start(strings.TrimPrefix(ep, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			s.etcd = append(s.etcd, p)
		}
		h.nodes = append(h.nodes, s)
		h.startNode(s)
	}
	testnode.WaitUntil(t, 30*time.Second, "a leader", func() bool {
		f, _ := h.admin.Fence(ctx)
		return f.Leader != ""
	})
	crons := cron.NewClient(h.pool)
	for i := range h.o.Profile.CronEntries {
		name := fmt.Sprintf("tick-%d", i)
		if _, err := crons.Create(ctx, cron.Entry{Name: name, Schedule: "@every 1s", Missed: cron.MissedAll,
			Job: cron.JobTemplate{Kind: "chaos.work", Args: []byte(`{"ms": 5}`), MaxAttempts: 100}}); err != nil {
			t.Fatal(err)
		}
		h.cronNames = append(h.cronNames, name)
	}
}

func (h *harness) startNode(s *slot) {
	var eps []string
	for _, p := range s.etcd {
		eps = append(eps, "http://"+p.Addr())
	}
	dbURL := s.pg.url()
	s.child = testnode.Start(h.t, dbURL, s.id, h.o.Lease,
		"GAFFER_TEST_ETCD="+strings.Join(eps, ","), "GAFFER_TEST_SESSION_TTL="+h.o.TTL.String(),
		"GAFFER_TEST_PREFIX=/chaos", "GAFFER_TEST_CONCURRENCY=8")
	s.down = false
}

// pick returns a random live node; leader biases the choice to (true) or
// away from (false) the leader, or neither (nil).
func (h *harness) pick(leader *bool) *slot {
	f, _ := h.admin.Fence(context.Background())
	var live, preferred []*slot
	for _, s := range h.nodes {
		if s.down {
			continue
		}
		live = append(live, s)
		if leader != nil && (s.id == f.Leader) == *leader {
			preferred = append(preferred, s)
		}
	}
	if len(preferred) > 0 {
		return preferred[h.rng.IntN(len(preferred))]
	}
	if len(live) == 0 {
		return nil
	}
	return live[h.rng.IntN(len(live))]
}

func (h *harness) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(h.rng.Int64N(int64(hi-lo)+1))
}

func (h *harness) inject(kind string) {
	ctx := context.Background()
	h.mu.Lock()
	h.faults[kind]++
	h.mu.Unlock()
	yes, no := true, false
	switch kind {
	case FaultKill:
		s := h.pick(nil)
		var killedAt time.Time
		h.pool.QueryRow(ctx, `SELECT now()`).Scan(&killedAt)
		s.child.Signal(syscall.SIGKILL)
		<-s.child.Exited
		s.down = true
		h.logf("kill %s", s.id)
		go h.measureRecovery(s.id, killedAt)
		time.Sleep(h.between(2*time.Second, 4*time.Second))
		h.startNode(s)
	case FaultPause, FaultPauseWorker:
		target := &yes
		if kind == FaultPauseWorker || h.rng.IntN(2) == 0 {
			target = &no
		}
		s := h.pick(target)
		d := 2*h.o.TTL + h.between(0, 2*time.Second)
		if kind == FaultPauseWorker {
			d = h.o.Lease + h.between(2*time.Second, 4*time.Second)
		}
		s.child.Signal(syscall.SIGSTOP)
		h.logf("pause %s for %s", s.id, d.Round(time.Millisecond))
		time.Sleep(d)
		s.child.Signal(syscall.SIGCONT)
	case FaultPGBlackhole:
		s := h.pick(nil)
		d := h.between(2*time.Second, 6*time.Second)
		h.logf("blackhole %s → postgres for %s", s.id, d.Round(time.Millisecond))
		s.pg.Set(faultproxy.Blackhole)
		time.Sleep(d)
		s.pg.Set(faultproxy.Pass)
	case FaultPGReset:
		s := h.pick(nil)
		h.logf("reset %s's postgres connections", s.id)
		s.pg.Set(faultproxy.Reset)
		time.Sleep(500 * time.Millisecond)
		s.pg.Set(faultproxy.Pass)
	case FaultPGLatency:
		s := h.pick(nil)
		lat := h.between(20*time.Millisecond, 150*time.Millisecond)
		h.logf("add %s latency %s → postgres", lat, s.id)
		s.pg.SetLatency(lat)
		time.Sleep(h.between(3*time.Second, 6*time.Second))
		s.pg.SetLatency(0)
	case FaultEtcdBlackhole:
		s := h.pick(nil)
		d := h.between(3*time.Second, 6*time.Second)
		h.logf("cut %s off from etcd for %s", s.id, d.Round(time.Millisecond))
		for _, p := range s.etcd {
			p.Set(faultproxy.Blackhole)
		}
		time.Sleep(d)
		for _, p := range s.etcd {
			p.Set(faultproxy.Pass)
		}
	case FaultPGRestart:
		h.logf("restart postgres (immediate)")
		if h.db != nil {
			h.db.crashPrimary(h)
			return
		}
		if err := h.pg.Restart(ctx); err != nil {
			h.t.Fatalf("restart postgres: %v", err)
		}
	case FaultPGFailover:
		h.db.failover(h)
	case FaultEtcdStop:
		i := h.etcd.Leader()
		if i < 0 || h.rng.IntN(2) == 0 {
			i = h.rng.IntN(len(h.etcd.Members))
		}
		d := h.between(3*time.Second, 6*time.Second)
		h.logf("stop etcd member %d (leader %d) for %s", i, h.etcd.Leader(), d.Round(time.Millisecond))
		h.etcd.Members[i].Stop()
		time.Sleep(d)
		if err := h.etcd.Members[i].Restart(); err != nil {
			h.t.Fatalf("restart etcd member: %v", err)
		}
	case FaultDrain:
		s := h.pick(&no)
		if err := h.admin.Drain(ctx, s.id, 5*time.Second); err != nil {
			h.logf("drain %s refused: %v", s.id, err)
			return
		}
		var from time.Time
		h.pool.QueryRow(ctx, `SELECT drain_requested_at FROM gaffer.nodes WHERE id = $1`, s.id).Scan(&from)
		h.logf("drain %s", s.id)
		select {
		case <-s.child.Left:
		case <-time.After(30 * time.Second):
			h.t.Fatalf("%s did not leave after its drain", s.id)
		}
		<-s.child.Exited
		var to time.Time
		h.pool.QueryRow(ctx, `SELECT now()`).Scan(&to)
		h.mu.Lock()
		h.drains = append(h.drains, window{node: s.id, from: from, to: to})
		h.mu.Unlock()
		s.down = true
		time.Sleep(time.Second)
		h.startNode(s)
	default:
		h.t.Fatalf("unknown fault %q", kind)
	}
}

// measureRecovery waits until none of the jobs a killed node was running
// is still running there, and records how long that took.
func (h *harness) measureRecovery(node string, killedAt time.Time) {
	ctx := context.Background()
	start := time.Now()
	var held int
	h.pool.QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND node = $1 AND attempted_at <= $2`, node, killedAt).Scan(&held)
	if held == 0 {
		return
	}
	for time.Since(start) < time.Minute {
		var n int
		if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM gaffer.jobs WHERE state = 'running' AND node = $1 AND attempted_at <= $2`, node, killedAt).Scan(&n); err == nil && n == 0 {
			h.mu.Lock()
			h.recovery = append(h.recovery, time.Since(start).Seconds())
			h.mu.Unlock()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (h *harness) jobLoad(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(h.o.Seed), 2))
	client := job.NewClient(h.pool, nil)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	per := max(1, h.o.Profile.JobsPerSec/10)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		reqs := make([]job.Request, per)
		for i := range reqs {
			ms := h.o.Profile.JobMS[0] + rng.IntN(h.o.Profile.JobMS[1]-h.o.Profile.JobMS[0]+1)
			args, _ := json.Marshal(map[string]any{"ms": ms, "fail": rng.Float64() < h.o.Profile.FailShare})
			reqs[i] = job.Request{Kind: "chaos.work", Args: json.RawMessage(args), MaxAttempts: 100}
		}
		ids, err := client.EnqueueMany(ctx, reqs)
		if err != nil {
			continue // not accepted (PostgreSQL restarting): not counted
		}
		h.mu.Lock()
		h.accepted = append(h.accepted, ids...)
		h.mu.Unlock()
	}
}

func (h *harness) replayLoad(ctx context.Context) {
	c := dlq.NewClient(h.pool)
	no := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
		entries, err := c.List(ctx, dlq.Filter{Replayed: &no, Limit: 5, Kind: "chaos.work"})
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.WorkflowRun != 0 {
				continue
			}
			r, err := c.Replay(ctx, "", e.ID)
			if err != nil {
				continue
			}
			h.mu.Lock()
			h.replays[r.EntryID] = r.JobID
			h.mu.Unlock()
		}
	}
}

func (h *harness) workflowLoad(ctx context.Context) {
	c := workflow.NewClient(h.pool)
	work := func(ms int) map[string]int { return map[string]int{"ms": ms} }
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.o.Profile.WorkflowEvery):
		}
		b := workflow.New("chaos").Job("a", "chaos.work", work(20), workflow.MaxAttempts(100))
		var mids []string
		for i := range 4 {
			n := fmt.Sprintf("b%d", i)
			mids = append(mids, n)
			b.Job(n, "chaos.work", work(50), workflow.After("a"), workflow.MaxAttempts(100))
		}
		b.Job("c", "chaos.work", work(20), workflow.After(mids...), workflow.MaxAttempts(100))
		def, err := b.Definition()
		if err != nil {
			h.t.Errorf("workflow definition: %v", err)
			return
		}
		run, err := c.Submit(ctx, def)
		if err != nil {
			continue
		}
		h.mu.Lock()
		h.runs = append(h.runs, run.ID)
		h.mu.Unlock()
	}
}

// heal ends every fault: proxies pass, etcd members run, nodes are up.
func (h *harness) heal() {
	for _, s := range h.nodes {
		s.pg.Set(faultproxy.Pass)
		s.pg.SetLatency(0)
		for _, p := range s.etcd {
			p.Set(faultproxy.Pass)
		}
		if s.down {
			h.startNode(s)
		}
	}
	h.logf("healed")
}
