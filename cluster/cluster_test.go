package cluster_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gafferhq/gaffer/cluster"
	"github.com/gafferhq/gaffer/internal/etcdserver"
	"github.com/gafferhq/gaffer/internal/knobs"
	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type fakeWorker struct {
	claiming atomic.Bool
	inFlight atomic.Int32
	released atomic.Int32
}

func (w *fakeWorker) SetClaiming(on bool) { w.claiming.Store(on) }
func (w *fakeWorker) InFlight() int       { return int(w.inFlight.Load()) }
func (w *fakeWorker) ReleaseRunning() error {
	w.released.Add(w.inFlight.Swap(0))
	return nil
}

type member struct {
	*cluster.Cluster
	id     string
	worker *fakeWorker
	reg    *prometheus.Registry
	left   chan struct{}
	stop   sync.Once
}

func startEtcd(t *testing.T) *etcdserver.Server {
	t.Helper()
	srv, err := etcdserver.Start("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func newMember(t *testing.T, st *store.Store, endpoint, id string, opts ...func(*cluster.Config)) *member {
	t.Helper()
	m := &member{id: id, worker: &fakeWorker{}, reg: prometheus.NewRegistry(), left: make(chan struct{})}
	m.worker.claiming.Store(true)
	rescuer, err := maintenance.NewLeaseRescuer(maintenance.LeaseRescuerConfig{Pool: st.Pool(), BatchSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	cfg := cluster.Config{
		Endpoints: []string{endpoint}, Prefix: "/" + t.Name(), SessionTTL: 2 * time.Second, ReportInterval: 200 * time.Millisecond,
		Pool: st.Pool(), Node: cluster.NodeInfo{ID: id, Hostname: "test", Version: "test", Queues: map[string]int{"default": 1}},
		Worker: m.worker, Registerer: m.reg,
		RescueNode: func(ctx context.Context, fence cluster.Fence, node string) (int, error) {
			return rescuer.RescueNode(ctx, fence, node)
		},
		OnLeave: func() { close(m.left) },
		Logger:  hclog.New(&hclog.LoggerOptions{Name: id, Level: hclog.Warn, Output: testWriter{t}}),
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Cluster = c
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

func (m *member) Stop() { m.stop.Do(m.Cluster.Stop) }

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			total := 0.0
			for _, m := range f.GetMetric() {
				total += value(m)
			}
			return total
		}
	}
	return 0
}

func value(m *dto.Metric) float64 {
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

func TestElectionRaisesFenceAndFailsOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := startEtcd(t)
	st := pgtest.NewStore(t)
	a := newMember(t, st, etcd.Endpoint(), "a")
	waitFor(t, 10*time.Second, "a to lead", a.IsLeader)
	b := newMember(t, st, etcd.Endpoint(), "b")
	time.Sleep(500 * time.Millisecond)
	if b.IsLeader() {
		t.Fatal("two leaders")
	}
	f1, _ := cluster.NewAdmin(st.Pool()).Fence(ctx)
	if f1.Leader != "a" || f1.Epoch != a.Status().Epoch || f1.Epoch <= 0 {
		t.Fatalf("fence %+v, a's epoch %d", f1, a.Status().Epoch)
	}
	if got := metricValue(t, a.reg, "gaffer_cluster_is_leader"); got != 1 {
		t.Fatalf("is_leader %v", got)
	}
	// a leaves cleanly: b takes over at once, with a higher epoch.
	a.Stop()
	took := waitFor(t, 10*time.Second, "b to lead", b.IsLeader)
	f2, _ := cluster.NewAdmin(st.Pool()).Fence(ctx)
	if f2.Leader != "b" || f2.Epoch <= f1.Epoch {
		t.Fatalf("fence after failover %+v (was %+v)", f2, f1)
	}
	t.Logf("failover after a clean stop took %s", took)
	// a's old epoch can no longer write.
	err := st.Fenced(ctx, f1.Epoch, func(q pgx.Tx) error { return nil })
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("write under the old epoch: %v", err)
	}
}

// A leader that does not know it was deposed (its session ended, and as a
// testing aid it ignores that) has its next leader-only write refused by
// the fence, and steps down; nothing it wrote commits.
func TestFenceRefusesDeposedLeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := startEtcd(t)
	st := pgtest.NewStore(t)
	_, err := st.Pool().Exec(ctx, `CREATE TABLE leader_writes (node text)`)
	if err != nil {
		t.Fatal(err)
	}
	// The knob is per node id: one no other test uses, since tests run
	// in parallel in this process.
	knobs.SetTrustFenceOnly("fence-only-a", true)
	t.Cleanup(func() { knobs.SetTrustFenceOnly("fence-only-a", false) })
	a := newMember(t, st, etcd.Endpoint(), "fence-only-a")
	waitFor(t, 10*time.Second, "a to lead", a.IsLeader)
	// Revoke a's lease behind its back, as if it had been paused past its TTL.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "/"+t.Name()+"/nodes/fence-only-a")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("a's key: %v %v", resp, err)
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	b := newMember(t, st, etcd.Endpoint(), "b")
	waitFor(t, 10*time.Second, "b to lead", b.IsLeader)
	if !a.IsLeader() {
		t.Fatal("a stepped down by itself; the test needs it to believe it still leads")
	}
	err = a.Do(ctx, func(q pgx.Tx) error {
		_, err := q.Exec(ctx, `INSERT INTO leader_writes VALUES ('a')`)
		return err
	})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("deposed leader's write: %v, want ErrFenced", err)
	}
	if got := metricValue(t, a.reg, "gaffer_cluster_fence_rejections_total"); got != 1 {
		t.Fatalf("fence rejections %v", got)
	}
	waitFor(t, 5*time.Second, "a to step down", func() bool { return !a.IsLeader() })
	var n int
	st.Pool().QueryRow(ctx, `SELECT count(*) FROM leader_writes`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d writes from the deposed leader committed", n)
	}
	// b's writes go through.
	if err := b.Do(ctx, func(q pgx.Tx) error {
		_, err := q.Exec(ctx, `INSERT INTO leader_writes VALUES ('b')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func TestDeadNodeRescue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := startEtcd(t)
	st := pgtest.NewStore(t)
	leader := newMember(t, st, etcd.Endpoint(), "leader")
	waitFor(t, 10*time.Second, "leader", leader.IsLeader)
	victim := newMember(t, st, etcd.Endpoint(), "victim")
	time.Sleep(300 * time.Millisecond)
	// The victim holds a job with a long lease.
	client := job.NewClient(st.Pool(), nil)
	res, err := client.Enqueue(ctx, job.Request{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "default", Limit: 1, Token: 9, LeaseTTL: time.Hour, Node: "victim"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v %v", rows, err)
	}
	// The victim's session ends without a goodbye (revoking its lease is
	// what etcd does when a dead node's TTL runs out).
	cli, _ := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}})
	defer cli.Close()
	resp, _ := cli.Get(ctx, "/"+t.Name()+"/nodes/victim")
	victim.Stop() // no Leave: like a crash, but also stop its report loop
	if len(resp.Kvs) == 1 {
		cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	}
	took := waitFor(t, 10*time.Second, "the victim's job to be rescued", func() bool {
		j, _ := client.Get(ctx, "", res.Job.ID)
		return j.State == job.Retrying
	})
	t.Logf("rescued %s after the victim's key vanished", took)
	j, _ := client.Get(ctx, "", res.Job.ID)
	if len(j.Errors) != 1 || j.Errors[0].Kind != "lost" || j.Errors[0].Node != "victim" {
		t.Fatalf("errors %+v", j.Errors)
	}
	waitFor(t, 5*time.Second, "the victim to be marked dead", func() bool {
		nodes, _ := cluster.NewAdmin(st.Pool()).Nodes(ctx)
		for _, n := range nodes {
			if n.ID == "victim" {
				return n.State == "dead" && n.LeftReason == "lost"
			}
		}
		return false
	})
}

// The leader never treats its own vanished key as a dead node: it is
// alive and running its jobs (if its session really ended, it has
// stepped down and the next leader rescues it). Rescuing itself would
// release jobs it is still running to other nodes.
func TestLeaderNeverRescuesItself(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := startEtcd(t)
	st := pgtest.NewStore(t)
	leader := newMember(t, st, etcd.Endpoint(), "leader")
	waitFor(t, 10*time.Second, "leader", leader.IsLeader)
	client := job.NewClient(st.Pool(), nil)
	res, err := client.Enqueue(ctx, job.Request{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := st.ClaimJobs(ctx, store.ClaimParams{Queue: "default", Limit: 1, Token: 9, LeaseTTL: time.Hour, Node: "leader"}); err != nil || len(rows) != 1 {
		t.Fatalf("claim: %v %v", rows, err)
	}
	// The leader's own registration disappears from under it.
	cli, _ := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}})
	defer cli.Close()
	if resp, err := cli.Delete(ctx, "/"+t.Name()+"/nodes/leader"); err != nil || resp.Deleted != 1 {
		t.Fatalf("delete the leader's key: %v %v", resp, err)
	}
	time.Sleep(1500 * time.Millisecond) // the watch answers within milliseconds
	if !leader.IsLeader() {
		t.Fatal("the leader stepped down: the test needs it leading")
	}
	if j, _ := client.Get(ctx, "", res.Job.ID); j.State != job.Running {
		t.Fatalf("the leader's own running job is %s (errors %+v): it rescued itself", j.State, j.Errors)
	}
	nodes, _ := cluster.NewAdmin(st.Pool()).Nodes(ctx)
	for _, n := range nodes {
		if n.ID == "leader" && n.State == "dead" {
			t.Fatalf("the leader marked itself dead (%s)", n.LeftReason)
		}
	}
}

func TestDeadNodeFoundWhenLeaderStarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := startEtcd(t)
	st := pgtest.NewStore(t)
	// A node that died while no leader was watching: live in PostgreSQL,
	// absent from etcd, holding a job.
	if err := st.RegisterNode(ctx, "ghost", "h", "v", "2025c", nil, nil); err != nil {
		t.Fatal(err)
	}
	client := job.NewClient(st.Pool(), nil)
	res, _ := client.Enqueue(ctx, job.Request{Kind: "k"})
	st.ClaimJobs(ctx, store.ClaimParams{Queue: "default", Limit: 1, Token: 9, LeaseTTL: time.Hour, Node: "ghost"})
	leader := newMember(t, st, etcd.Endpoint(), "leader")
	waitFor(t, 10*time.Second, "leader", leader.IsLeader)
	waitFor(t, 10*time.Second, "the ghost's job to be rescued", func() bool {
		j, _ := client.Get(ctx, "", res.Job.ID)
		return j.State == job.Retrying
	})
}

// A node writes its row, then registers in etcd a moment later. A leader
// that starts its dead-node watch in between must not call it lost (and
// rescue the jobs it may already have claimed): it looks again after the
// grace. Red when the watch marks every unregistered row at once (the
// newcomer is dead within a second of the leader's election).
func TestStartingNodeIsNotLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := startEtcd(t)
	st := pgtest.NewStore(t)
	if err := st.RegisterNode(ctx, "newcomer", "h", "v", "2025c", nil, nil); err != nil {
		t.Fatal(err)
	}
	leader := newMember(t, st, etcd.Endpoint(), "leader")
	waitFor(t, 10*time.Second, "leader", leader.IsLeader)
	state := func() string {
		var s string
		if err := st.Pool().QueryRow(ctx, `SELECT state FROM gaffer.nodes WHERE id = 'newcomer'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Registers in etcd a second after the leader looked.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if s := state(); s == "dead" {
			t.Fatal("a node that wrote its row but had not yet registered in etcd was marked dead")
		}
	}
	newMember(t, st, etcd.Endpoint(), "newcomer")
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if s := state(); s == "dead" {
			t.Fatal("the newcomer was marked dead after it registered")
		}
	}
}

func TestDrainAndUndrain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := startEtcd(t)
	st := pgtest.NewStore(t)
	admin := cluster.NewAdmin(st.Pool())
	n := newMember(t, st, etcd.Endpoint(), "n")
	n.worker.inFlight.Store(2)
	if err := admin.Drain(ctx, "nope", time.Minute); !errors.Is(err, cluster.ErrUnknownNode) {
		t.Fatalf("drain unknown node: %v", err)
	}
	if err := admin.Drain(ctx, "n", -time.Second); err == nil {
		t.Fatal("negative deadline accepted")
	}
	if err := admin.Drain(ctx, "n", time.Minute); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, 2*time.Second, "claiming to stop", func() bool { return !n.worker.claiming.Load() })
	t.Logf("claiming stopped %s after the drain order", took)
	if s := n.Status().State; s != "draining" {
		t.Fatalf("state %s", s)
	}
	// Undrain: back to work.
	if err := admin.Undrain(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "claiming to resume", n.worker.claiming.Load)
	// Drain again; the running jobs finish; the node leaves.
	if err := admin.Drain(ctx, "n", time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "claiming to stop", func() bool { return !n.worker.claiming.Load() })
	select {
	case <-n.left:
		t.Fatal("left with jobs still running")
	case <-time.After(300 * time.Millisecond):
	}
	n.worker.inFlight.Store(0)
	select {
	case <-n.left:
	case <-time.After(5 * time.Second):
		t.Fatal("node did not leave after its jobs finished")
	}
	if n.worker.released.Load() != 0 {
		t.Fatal("jobs released although they finished in time")
	}
	nodes, _ := admin.Nodes(ctx)
	if len(nodes) != 1 || nodes[0].State != "dead" || nodes[0].LeftReason != "drained" || nodes[0].DrainedAt == nil {
		t.Fatalf("nodes %+v", nodes)
	}
	if err := admin.Drain(ctx, "n", time.Minute); !errors.Is(err, cluster.ErrUnknownNode) {
		t.Fatalf("drain a left node: %v", err)
	}
}

func TestDrainDeadlineReleasesRunningJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := startEtcd(t)
	st := pgtest.NewStore(t)
	n := newMember(t, st, etcd.Endpoint(), "n")
	n.worker.inFlight.Store(3)
	if err := cluster.NewAdmin(st.Pool()).Drain(ctx, "n", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.left:
	case <-time.After(5 * time.Second):
		t.Fatal("node did not leave at the deadline")
	}
	if got := n.worker.released.Load(); got != 3 {
		t.Fatalf("released %d jobs at the deadline, want 3", got)
	}
}

func TestEtcdOutage(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	st := pgtest.NewStore(t)
	n := newMember(t, st, etcd.Endpoint(), "n")
	waitFor(t, 10*time.Second, "n to lead", n.IsLeader)
	epoch := n.Status().Epoch
	etcd.Stop()
	waitFor(t, 10*time.Second, "leadership to lapse", func() bool { return !n.IsLeader() })
	waitFor(t, 10*time.Second, "the outage to show", func() bool { return len(n.Status().Degraded) > 0 })
	if err := etcd.Restart(); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, 30*time.Second, "leadership to resume", n.IsLeader)
	if n.Status().Epoch <= epoch || len(n.Status().Degraded) != 0 {
		t.Fatalf("after the outage: %+v (epoch before %d)", n.Status(), epoch)
	}
	t.Logf("leadership resumed %s after etcd returned", took)
}

// etcd restarted from empty (a lost disk, a container without a volume,
// gaffer dev with a kept database): its revisions start over below the
// epoch the fence holds. A leader must still be elected at once, with an
// epoch above the old one, and the old epoch stays refused. Red when the
// epoch is the bare etcd revision: no node could raise the fence until
// etcd's revision caught up.
func TestLeaderAfterEtcdLostItsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	etcd := startEtcd(t)
	st := pgtest.NewStore(t)
	// Push the revision up, as months of use would, so that a fresh etcd
	// is far behind.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if _, err := cli.Put(ctx, "/filler", strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	cli.Close()
	n := newMember(t, st, etcd.Endpoint(), "n")
	waitFor(t, 10*time.Second, "n to lead", n.IsLeader)
	before, _ := cluster.NewAdmin(st.Pool()).Fence(ctx)
	if err := etcd.RestartEmpty(); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, 30*time.Second, "a leader on the emptied etcd", func() bool {
		f, _ := cluster.NewAdmin(st.Pool()).Fence(ctx)
		return n.IsLeader() && f.Epoch > before.Epoch
	})
	after, _ := cluster.NewAdmin(st.Pool()).Fence(ctx)
	t.Logf("leader again %s after etcd came back empty; epoch %d -> %d", took, before.Epoch, after.Epoch)
	if err := st.Fenced(ctx, before.Epoch, func(q pgx.Tx) error { return nil }); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the old epoch can still write: %v", err)
	}
}
