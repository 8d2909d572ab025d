package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/faultproxy"
	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/internal/testnode"
	"github.com/gafferhq/gaffer/store"
)

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
	// ScriptedEvery is how often a scripted workflow run is submitted (a
	// replay of allow_failure steps, a failed run resumed by a replay
	// after a cancel, or a step's job cancelled in a running run, in
	// seeded turn); zero submits none.
	ScriptedEvery time.Duration
	// Faults are drawn from uniformly: a kind listed twice comes twice as
	// often. Ensure are injected at least once each, drawn or not.
	Faults []string
	Ensure []string
	// LimitedShare is the share of the job load that runs under a
	// cluster-wide concurrency limit per key (limits.go).
	LimitedShare float64
	// ScheduledShare is the share of the job load enqueued to run later
	// (a delay up to 2 s); FairnessKeys, how many fairness keys the rest
	// of the unlimited load is spread over (0: none); with LimitChurn a
	// second limit on the load is created, changed and deleted all along
	// (limits.go), while claims run under the audited one.
	ScheduledShare float64
	FairnessKeys   int
	LimitChurn     bool
	// SequencedShare is the share of the unlimited job load enqueued into
	// a few sequences (sequences.go).
	SequencedShare float64
	Settle         time.Duration // how long the healed cluster gets to finish
}

// Profiles by name.
var Profiles = map[string]Profile{
	"ci": {Name: "ci", Duration: 100 * time.Second, FaultGap: [2]time.Duration{2 * time.Second, 5 * time.Second},
		JobsPerSec: 40, FailShare: 0.1, JobMS: [2]int{10, 300}, CronEntries: 2, WorkflowEvery: 4 * time.Second,
		ScriptedEvery: 4 * time.Second, Faults: AllFaults, Ensure: []string{FaultSigterm, FaultKillInEtcdOutage},
		LimitedShare: 0.3, ScheduledShare: 0.1, FairnessKeys: 8, LimitChurn: true, SequencedShare: 0.1, Settle: 2 * time.Minute},
	// long runs PostgreSQL as a Patroni primary and synchronous standby
	// (failover.go), so that it can fail over too.
	"long": {Name: "long", Duration: 30 * time.Minute, FaultGap: [2]time.Duration{2 * time.Second, 8 * time.Second},
		JobsPerSec: 60, FailShare: 0.1, JobMS: [2]int{10, 500}, CronEntries: 3, WorkflowEvery: 3 * time.Second,
		ScriptedEvery: 2 * time.Second, Faults: append(slices.Clip(AllFaults), FaultPGFailover),
		Ensure: []string{FaultSigterm, FaultKillInEtcdOutage}, LimitedShare: 0.3, ScheduledShare: 0.1, FairnessKeys: 8,
		LimitChurn: true, SequencedShare: 0.1, Settle: 3 * time.Minute},
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
	// limits-mutation: for the run whose claims skip the limit check
	// (Options.NoLimitCheck). Half the load is limited, so that the keys
	// queue up behind the faults that stop claims (a kill, a paused
	// worker, a PostgreSQL restart) and the next claim finds more than
	// the limit due at once.
	"limits-mutation": {Name: "limits-mutation", Duration: 20 * time.Second, FaultGap: [2]time.Duration{time.Second, 2 * time.Second},
		JobsPerSec: 40, JobMS: [2]int{10, 300}, Faults: []string{FaultKill, FaultPauseWorker, FaultPGRestart},
		LimitedShare: 0.5, Settle: time.Minute},
}

// Options of a run.
type Options struct {
	Profile Profile
	Seed    int64
	Nodes   int           // default 3
	Lease   time.Duration // job lease, default 3s
	TTL     time.Duration // etcd session TTL, default 2s
	// NoLimitCheck removes the limit check from the claim (a mutation:
	// see setUpLimit).
	NoLimitCheck bool
}

// Report is what a run found.
type Report struct {
	Profile         string `json:"profile"`
	Seed            int64  `json:"seed"`
	Jobs            int    `json:"jobs_accepted"`
	Completed       int    `json:"completed"`
	Failed          int    `json:"failed_into_dlq"`
	Replays         int    `json:"dlq_replays"`
	CronOccurrences int    `json:"cron_occurrences"`
	Workflows       int    `json:"workflow_runs"`
	// Batches are the batches opened (each checked for exactly one
	// callback).
	Batches       int            `json:"batches"`
	WorkflowSteps int            `json:"workflow_steps"`
	ScriptedRuns  map[string]int `json:"scripted_workflow_runs"`
	StepReplays   int            `json:"workflow_step_replays"`
	StepCancels   int            `json:"workflow_step_cancels"`
	// ReplaysBeforeDependent counts replays of allow_failure steps made
	// while a dependent still waited (the case a double count broke);
	// CancelledStepsResumed, steps whose job was cancelled in a failed
	// run and that a replay's resume brought back; InputsChecked, the
	// step inputs compared with their dependency's final result.
	ReplaysBeforeDependent int            `json:"replays_before_dependent_started"`
	CancelledStepsResumed  int            `json:"cancelled_steps_resumed"`
	InputsChecked          int            `json:"step_inputs_checked"`
	Faults                 map[string]int `json:"faults"`
	Violations             []string       `json:"violations"`
	Executions             int            `json:"handler_executions"`
	ExternalDuplicates     int            `json:"external_effect_duplicates"`
	Recovery               []float64      `json:"recovery_seconds"`
	StaleRefused           int            `json:"stale_writes_refused"`
	// ClaimsReleased counts the jobs a SIGTERMed node claimed while it
	// stopped and gave back unrun (claims that were in flight);
	// SigtermsAimed, the SIGTERMs sent while a claim the node had made was
	// committed and its answer still on the way.
	ClaimsReleased int `json:"claims_released_while_stopping"`
	SigtermsAimed  int `json:"sigterms_on_a_claim_in_flight"`
	// EtcdOutageRerun is, for each node killed while etcd was down, how
	// long its jobs took to run again elsewhere.
	EtcdOutageRerun []float64 `json:"etcd_outage_rerun_seconds"`
	FaultLog        []string  `json:"fault_log"`
	// LimitClaims counts the claims of limited jobs audited; LimitFull,
	// those that left their key at the limit; LimitPeak, the most of each
	// key's jobs seen running at once.
	LimitClaims int            `json:"limited_claims"`
	LimitFull   int            `json:"limited_claims_at_the_limit"`
	LimitPeak   map[string]int `json:"limit_peak_running"`
	// LimitChanges counts the changes the limit churn made (created,
	// changed, deleted) while claims ran.
	LimitChanges int `json:"limit_changes"`
	// SequenceStarts counts the attempts of sequences' jobs audited.
	SequenceStarts int `json:"sequence_attempts_started"`
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

	mu                       sync.Mutex
	accepted                 []int64
	runs                     []*trackedRun
	batches                  []int64
	replays                  map[int64]int64
	drains                   []window
	sigterms                 []stopWindow
	aimed                    int // SIGTERMs that landed on a committed claim in flight
	recovery                 []float64
	reruns                   []float64
	violations               []string // found while the faults went on
	stepReplays, stepCancels int
	limitChanges             int // made by limitChurn
	faults                   map[string]int
	faultLog                 []string
	cronNames                []string
	start                    time.Time
	scripts                  sync.WaitGroup // scripted workflow runs still being driven
}

type window struct {
	node     string
	from, to time.Time
}

// violation records what a fault's own check found.
func (h *harness) violation(format string, args ...any) {
	h.logf("VIOLATION: "+format, args...)
	h.mu.Lock()
	h.violations = append(h.violations, fmt.Sprintf(format, args...))
	h.mu.Unlock()
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
	for _, fn := range []func(context.Context){h.jobLoad, h.replayLoad, h.workflowLoad, h.scriptedLoad, h.limitChurn, h.batchLoad} {
		load.Add(1)
		go func() { defer load.Done(); fn(ctx) }()
	}
	h.start = time.Now()
	ensure := append([]string(nil), o.Profile.Ensure...)
	h.rng.Shuffle(len(ensure), func(i, j int) { ensure[i], ensure[j] = ensure[j], ensure[i] })
	gap := func() { time.Sleep(h.between(o.Profile.FaultGap[0], o.Profile.FaultGap[1])) }
	for time.Since(h.start) < o.Profile.Duration {
		gap()
		// A fault that must come comes early, one slot in three.
		kind := o.Profile.Faults[h.rng.IntN(len(o.Profile.Faults))]
		if len(ensure) > 0 && h.rng.IntN(3) == 0 {
			kind = ensure[0]
		}
		ensure = slices.DeleteFunc(ensure, func(k string) bool { return k == kind })
		h.inject(kind)
	}
	for _, kind := range ensure { // not drawn in time
		gap()
		h.inject(kind)
	}
	stopLoad()
	load.Wait()
	h.heal()
	h.scripts.Wait()
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
		-- at: the attempt's start (attempted_at: when the claim admitted it);
		-- began: when the claim's transaction began, before it read whether
		-- its node was draining.
		CREATE TABLE test_claims (job_id bigint, node text, at timestamptz, attempt int, began timestamptz);
		CREATE INDEX ON test_claims (node, at);
		CREATE FUNCTION test_claim_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO test_claims VALUES (NEW.id, NEW.node, NEW.attempted_at, NEW.attempt, now()); RETURN NEW; END $$;
		CREATE TRIGGER test_claim_audit AFTER UPDATE ON gaffer.jobs FOR EACH ROW
			WHEN (NEW.state = 'running' AND OLD.state IS DISTINCT FROM 'running') EXECUTE FUNCTION test_claim_audit();`); err != nil {
		t.Fatal(err)
	}
	auditSteps(t, h.pool)
	h.setUpLimit(ctx)
	h.setUpSequenceAudit(ctx)
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
