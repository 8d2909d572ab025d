package gaffer_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// clusterEnv is a database, an etcd and the node processes of one test.
type clusterEnv struct {
	t      *testing.T
	url    string
	pool   *pgxpool.Pool
	etcd   *etcdserver.Server
	ttl    time.Duration
	client *job.Client
	admin  *cluster.Admin
}

func newClusterEnv(t *testing.T, ttl time.Duration) *clusterEnv {
	t.Helper()
	etcd, err := etcdserver.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	url := pgtest.NewDatabase(t)
	pool := openPool(t, url)
	auditCompletions(t, pool)
	st := store.New(pool)
	return &clusterEnv{t: t, url: url, pool: pool, etcd: etcd, ttl: ttl, client: job.NewClient(st.Pool(), nil), admin: cluster.NewAdmin(st.Pool())}
}

func (e *clusterEnv) node(id string, env ...string) *child {
	e.t.Helper()
	env = append(env, "GAFFER_TEST_ETCD="+e.etcd.Endpoint(), "GAFFER_TEST_SESSION_TTL="+e.ttl.String(),
		"GAFFER_TEST_PREFIX=/"+strings.ReplaceAll(e.t.Name(), "/", "_"))
	return startChild(e.t, e.url, id, 30*time.Second, env...)
}

func (e *clusterEnv) fence() cluster.FenceState {
	e.t.Helper()
	f, err := e.admin.Fence(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

func (e *clusterEnv) waitLeader(id string) cluster.FenceState {
	e.t.Helper()
	waitUntil(e.t, 15*time.Second, id+" to lead", func() bool { return e.fence().Leader == id })
	return e.fence()
}

// Leader killed with SIGKILL: a new leader within TTL + 2s, with a larger
// epoch.
func TestLeaderKilledNewLeaderWithinTTL(t *testing.T) {
	t.Parallel()
	e := newClusterEnv(t, 3*time.Second)
	n1 := e.node("node-1")
	before := e.waitLeader("node-1")
	e.node("node-2")
	e.node("node-3")
	time.Sleep(500 * time.Millisecond) // both are campaigning
	n1.Signal(syscall.SIGKILL)
	killed := time.Now()
	waitUntil(t, e.ttl+10*time.Second, "a new leader", func() bool {
		f := e.fence()
		return f.Leader != "node-1" && f.Epoch > before.Epoch
	})
	took := time.Since(killed)
	after := e.fence()
	t.Logf("leader node-1 killed; %s leads after %s (TTL %s), epoch %d → %d", after.Leader, took.Round(time.Millisecond), e.ttl, before.Epoch, after.Epoch)
	if took > e.ttl+2*time.Second {
		t.Fatalf("new leader after %s, want within TTL + 2s = %s", took, e.ttl+2*time.Second)
	}
}

// Leader stopped with SIGSTOP for 2×TTL, then resumed: a new leader was
// elected meanwhile, the old leader writes nothing that lands, and steps
// down. With TrustFenceOnly the old leader ignores its own view of its
// session, so only the PostgreSQL fence stops it: its writes must be
// refused (and counted). With the defaults, its trust window has run out,
// so it must not even try.
func TestPausedLeaderIsFencedOnResume(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"fence-only", "trust-window"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := newClusterEnv(t, 2*time.Second)
			var env []string
			if mode == "fence-only" {
				env = append(env, "GAFFER_TEST_FENCE_ONLY=1")
			}
			a := e.node("node-a", env...)
			before := e.waitLeader("node-a")
			e.node("node-b", env...)
			time.Sleep(300 * time.Millisecond)
			a.Signal(syscall.SIGSTOP)
			stopped := time.Now()
			waitUntil(t, 2*e.ttl+5*time.Second, "node-b to lead", func() bool { return e.fence().Leader == "node-b" })
			if rest := 2*e.ttl - time.Since(stopped); rest > 0 {
				time.Sleep(rest)
			}
			during := e.fence()
			if during.Epoch <= before.Epoch {
				t.Fatalf("epoch did not increase: %d → %d", before.Epoch, during.Epoch)
			}
			a.Signal(syscall.SIGCONT)
			waitUntil(t, 10*time.Second, "node-a to step down", func() bool {
				return a.Metric("gaffer_cluster_is_leader", "", "") == 0
			})
			rejected := a.Metric("gaffer_cluster_fence_rejections_total", "", "")
			switch mode {
			case "fence-only":
				waitUntil(t, 10*time.Second, "node-a's write to be refused by the fence", func() bool {
					rejected = a.Metric("gaffer_cluster_fence_rejections_total", "", "")
					return rejected >= 1
				})
			case "trust-window":
				if rejected != 0 {
					t.Fatalf("node-a attempted %v leader-only writes after its trust window ran out", rejected)
				}
			}
			if f := e.fence(); f.Leader != "node-b" || f.Epoch != during.Epoch {
				t.Fatalf("fence after resume %+v, want node-b's %d", f, during.Epoch)
			}
			t.Logf("%s: epoch %d → %d; node-a's refused writes: %v", mode, before.Epoch, during.Epoch, rejected)
		})
	}
}

// A worker killed with SIGKILL mid-job: its jobs run again on another
// node within TTL + 2s — well before their 30s job lease would expire.
func TestWorkerKilledJobsRerunWithinTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newClusterEnv(t, 3*time.Second)
	// Four slots each and eight jobs: whichever node dies, the two left
	// have room for its jobs.
	conc := "GAFFER_TEST_CONCURRENCY=4"
	e.node("node-1", conc)
	e.waitLeader("node-1")
	nodes := map[string]*child{"node-2": e.node("node-2", conc), "node-3": e.node("node-3", conc)}
	reqs := make([]job.Request, 8)
	for i := range reqs {
		reqs[i] = job.Request{Kind: "work", Args: map[string]int{"ms": 15000}}
	}
	if _, err := e.client.EnqueueMany(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "all jobs running, some off the leader", func() bool {
		return scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE state = 'running'`) == 8
	})
	// Kill the non-leader running the most jobs.
	victim := scalar[string](t, e.pool, `SELECT node FROM gaffer.jobs WHERE state = 'running' AND node <> 'node-1'
		GROUP BY node ORDER BY count(*) DESC, node LIMIT 1`)
	var orphaned []int64
	rows, _ := e.pool.Query(ctx, `SELECT id FROM gaffer.jobs WHERE state = 'running' AND node = $1`, victim)
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		orphaned = append(orphaned, id)
	}
	nodes[victim].Signal(syscall.SIGKILL)
	killed := time.Now()
	waitUntil(t, e.ttl+20*time.Second, "the orphaned jobs to run again elsewhere", func() bool {
		return scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE id = ANY($1) AND state = 'running' AND attempt = 2 AND node <> $2`,
			orphaned, victim) == len(orphaned)
	})
	took := time.Since(killed)
	t.Logf("killed %s with %d running jobs; all running again elsewhere after %s (TTL %s, job lease 30s)", victim, len(orphaned), took.Round(time.Millisecond), e.ttl)
	if took > e.ttl+2*time.Second {
		t.Fatalf("jobs ran again after %s, want within TTL + 2s", took)
	}
	waitUntil(t, 5*time.Second, "the victim to be marked lost", func() bool {
		return scalar[string](t, e.pool, `SELECT coalesce(left_reason, '') FROM gaffer.nodes WHERE id = $1`, victim) == "lost"
	})
}

// loadGenerator enqueues short jobs until stopped, and returns how many.
func loadGenerator(t *testing.T, client *job.Client, perTick int, every time.Duration) (stop func() int) {
	var n atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			reqs := make([]job.Request, perTick)
			for i := range reqs {
				reqs[i] = job.Request{Kind: "work", Args: map[string]int{"ms": 20 + rand.IntN(200)}}
			}
			if _, err := client.EnqueueMany(context.Background(), reqs); err != nil {
				t.Errorf("enqueue: %v", err)
				return
			}
			n.Add(int64(perTick))
		}
	}()
	return func() int {
		close(done)
		wg.Wait()
		return int(n.Load())
	}
}

// Drain under load: zero claims by the node after the drain began; its
// in-flight jobs finish; it leaves; no job is lost.
func TestDrainUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newClusterEnv(t, 3*time.Second)
	e.node("node-1")
	e.waitLeader("node-1")
	victim := e.node("node-2")
	e.node("node-3")
	stop := loadGenerator(t, e.client, 10, 50*time.Millisecond)
	waitUntil(t, 10*time.Second, "node-2 to be busy", func() bool {
		return scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE node = 'node-2' AND state = 'running'`) >= 3
	})
	if err := e.admin.Drain(ctx, "node-2", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The order has committed: every claim transaction that starts from
	// now on sees it. (drain_requested_at is the clock inside the order's
	// transaction, which may commit well after it on a loaded machine; a
	// claim begun meanwhile rightly did not see the order.)
	drainAt := scalar[time.Time](t, e.pool, `SELECT clock_timestamp()`)
	var inFlight []int64
	rows, _ := e.pool.Query(ctx, `SELECT id FROM gaffer.jobs WHERE node = 'node-2' AND state = 'running'`)
	for rows.Next() {
		var id int64
		rows.Scan(&id)
		inFlight = append(inFlight, id)
	}
	select {
	case <-victim.Left:
	case <-time.After(20 * time.Second):
		t.Fatal("node-2 did not leave")
	}
	select {
	case <-victim.Exited:
	case <-time.After(10 * time.Second):
		t.Fatal("node-2's process did not exit after leaving")
	}
	if code := victim.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("node-2 exited with %d", code)
	}
	time.Sleep(time.Second) // more load, on the two nodes left
	total := stop()
	waitUntil(t, 60*time.Second, "every job to complete", func() bool {
		return scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE state = 'completed'`) == total
	})
	// A job's attempted_at is when its claim transaction began (no limit
	// applies here).
	if n := scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE node = 'node-2' AND attempted_at > $1::timestamptz`, drainAt); n != 0 {
		t.Fatalf("node-2 claimed %d jobs after the drain began", n)
	}
	if n := scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE id = ANY($1) AND node = 'node-2' AND attempt = 1 AND state = 'completed'`, inFlight); n != len(inFlight) {
		t.Fatalf("%d of node-2's %d in-flight jobs finished on it", n, len(inFlight))
	}
	if n := scalar[int](t, e.pool, `SELECT count(*) FROM (SELECT job_id FROM test_completions GROUP BY job_id HAVING count(*) > 1) d`); n != 0 {
		t.Fatalf("%d jobs completed twice", n)
	}
	var state, reason string
	e.pool.QueryRow(ctx, `SELECT state, left_reason FROM gaffer.nodes WHERE id = 'node-2'`).Scan(&state, &reason)
	if state != "dead" || reason != "drained" {
		t.Fatalf("node-2 is %s (%s), want dead (drained)", state, reason)
	}
	t.Logf("drained node-2 with %d jobs in flight; %d jobs completed, none lost", len(inFlight), total)
}

// etcd stopped for 30s under load: jobs keep completing throughout, and
// leadership resumes once etcd is back.
func TestEtcdOutageUnderLoad(t *testing.T) {
	t.Parallel()
	e := newClusterEnv(t, 3*time.Second)
	e.node("node-1")
	before := e.waitLeader("node-1")
	e.node("node-2")
	stop := loadGenerator(t, e.client, 5, 100*time.Millisecond)
	time.Sleep(2 * time.Second)
	e.etcd.Stop()
	completed := func() int {
		return scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE state = 'completed'`)
	}
	last := completed()
	for i := range 6 {
		time.Sleep(5 * time.Second)
		now := completed()
		if now <= last {
			t.Fatalf("no job completed in the %s-%s window of the etcd outage", time.Duration(i)*5*time.Second, time.Duration(i+1)*5*time.Second)
		}
		t.Logf("etcd down %2ds: %d jobs completed", (i+1)*5, now)
		last = now
	}
	if err := e.etcd.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	waitUntil(t, 30*time.Second, "leadership to resume", func() bool { return e.fence().Epoch > before.Epoch })
	t.Logf("a leader (%s) raised the fence %s after etcd returned", e.fence().Leader, time.Since(restarted).Round(time.Millisecond))
	total := stop()
	waitUntil(t, 60*time.Second, "every job to complete", func() bool { return completed() == total })
}

// A node killed while etcd is down: no leader can be proven, yet its jobs
// run again once their lease expires — the lease is the backstop that
// needs only PostgreSQL (G3, G5). Red when lease rescue runs on the leader
// only.
func TestNodeKilledDuringEtcdOutageIsRescued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newClusterEnv(t, 2*time.Second)
	const lease = 2 * time.Second
	env := func(id string) *child {
		return startChild(t, e.url, id, lease, "GAFFER_TEST_ETCD="+e.etcd.Endpoint(), "GAFFER_TEST_SESSION_TTL="+e.ttl.String(),
			"GAFFER_TEST_PREFIX=/"+t.Name())
	}
	nodes := map[string]*child{"node-1": env("node-1")}
	e.waitLeader("node-1")
	nodes["node-2"] = env("node-2")
	res, err := e.client.Enqueue(ctx, job.Request{Kind: "work", Args: map[string]int{"ms": 60000}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	waitUntil(t, 10*time.Second, "the job to run", func() bool {
		return scalar[string](t, e.pool, `SELECT state FROM gaffer.jobs WHERE id = $1`, id) == "running"
	})
	victim := scalar[string](t, e.pool, `SELECT node FROM gaffer.jobs WHERE id = $1`, id)
	e.etcd.Stop()
	// Past the session TTL no node can prove it leads.
	time.Sleep(e.ttl + time.Second)
	nodes[victim].Signal(syscall.SIGKILL)
	killed := time.Now()
	waitUntil(t, lease+10*time.Second, "the killed node's job to run again elsewhere", func() bool {
		return scalar[bool](t, e.pool, `SELECT state = 'running' AND attempt = 2 AND node <> $2 FROM gaffer.jobs WHERE id = $1`, id, victim)
	})
	t.Logf("killed %s during the etcd outage; its job ran again after %s (lease %s)", victim, time.Since(killed).Round(time.Millisecond), lease)
	if kind := scalar[string](t, e.pool, `SELECT errors->0->>'kind' FROM gaffer.jobs WHERE id = $1`, id); kind != "lost" {
		t.Fatalf("first attempt ended %q, want lost", kind)
	}
}
