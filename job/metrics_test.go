package job_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// Kinds and queue names are chosen by tenants; each label value is a
// series Prometheus keeps. 10,000 made-up kinds in 500 made-up queues,
// enqueued, run (and failed: no handler) and counted in the queue gauges,
// must keep /metrics within a fixed series budget (red without the label
// bound: 964 made-up kinds took /metrics from 70 KB to 4.1 MB).
func TestMetricLabelsAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.reg.HandleFunc("known.kind", func(ctx context.Context, j *job.Job) error { return nil })
	labels, err := maintenance.NewLabelRefresher(maintenance.LabelRefresherConfig{Pool: e.st.Pool(), Metrics: e.metrics, Registry: e.reg,
		Queues: []string{"default"}, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	labels.Start(ctx)
	defer labels.Stop()

	const made = 10000
	reqs := make([]job.Request, 0, made+1)
	for i := range made {
		reqs = append(reqs, job.Request{Kind: fmt.Sprintf("made.up.%05d", i), Queue: fmt.Sprintf("q%03d", i%500), MaxAttempts: 1})
	}
	reqs = append(reqs, job.Request{Kind: "known.kind"})
	if _, err := e.client.EnqueueMany(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	// One made-up kind in the worked queue: it runs, fails (no handler)
	// and is counted.
	stray := e.enqueue(job.Request{Kind: "made.up.stray", MaxAttempts: 1})
	e.startWorker(job.WorkerConfig{})
	e.waitState(stray.ID, job.Failed)
	monitor, err := maintenance.NewQueueMonitor(maintenance.QueueMonitorConfig{Pool: e.st.Pool(), Metrics: e.metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := monitor.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}

	families, err := e.promReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	var sample []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			series++
			for _, l := range m.GetLabel() {
				if strings.HasPrefix(l.GetValue(), "made.up") || (strings.HasPrefix(l.GetValue(), "q") && len(l.GetValue()) == 4) {
					sample = append(sample, f.GetName()+"{"+l.GetName()+"="+l.GetValue()+"}")
				}
			}
		}
	}
	if len(sample) > 0 {
		t.Fatalf("%d series carry a made-up kind or queue, e.g. %v", len(sample), sample[:min(5, len(sample))])
	}
	const budget = 100
	if series > budget {
		t.Fatalf("%d series after %d made-up kinds, budget %d", series, made, budget)
	}
	if e.counter("gaffer_job_enqueued_total", "kind", job.OtherLabel) != made+1 ||
		e.counter("gaffer_job_enqueued_total", "kind", "known.kind") != 1 {
		t.Fatalf("enqueued: other %v, known.kind %v", e.counter("gaffer_job_enqueued_total", "kind", job.OtherLabel),
			e.counter("gaffer_job_enqueued_total", "kind", "known.kind"))
	}
	if got := e.counter("gaffer_queue_jobs", "queue", job.OtherLabel, "state", "pending"); got != made {
		t.Fatalf("pending in made-up queues counted %v under %q, want %d", got, job.OtherLabel, made)
	}
	t.Logf("%d series for %d made-up kinds in 500 made-up queues", series, made)
}

// Remote workers name kinds and queues too. Those of a worker registered
// with a token spanning tenants (the operator's) are label values like a
// node's; those of tenants' own workers are tenant-chosen, so only a few
// become labels — each tenant's first by name, round-robin over tenants
// (job.RemoteLabelBound) — and 40 tenants registering 256 kinds in 32
// queues each, then enqueuing every kind into each of their queues, keep
// /metrics within the budget above. Red with known_labels ignoring remote
// workers (py.resize counted under other) and with the tenants' bound
// lifted (3,000+ series).
func TestRemoteWorkersNameMetricLabelsWithinBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.reg.HandleFunc("known.kind", func(ctx context.Context, j *job.Job) error { return nil })
	labels, err := maintenance.NewLabelRefresher(maintenance.LabelRefresherConfig{Pool: e.st.Pool(), Metrics: e.metrics, Registry: e.reg,
		Queues: []string{"default"}, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	labels.Start(ctx)
	defer labels.Stop()
	register := func(id, tenant string, queues, kinds []string) {
		t.Helper()
		if err := e.st.RegisterRemoteWorker(ctx, store.RemoteWorkerParams{ID: id, Name: id, Version: "1", Tenant: tenant,
			Queues: queues, Kinds: kinds, MaxPerTenant: 10}); err != nil {
			t.Fatal(err)
		}
	}
	// The operator's Python workers, and one tenant's own.
	register("ops-py", store.AllTenants, []string{"py"}, []string{"py.resize", "py.mail"})
	register("solo-1", "solo", []string{"solo.q"}, []string{"solo.a", "solo.b"})
	if err := labels.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var reqs []job.Request
	for _, k := range []string{"py.resize", "py.mail"} {
		reqs = append(reqs, job.Request{Kind: k, Queue: "py"})
	}
	for _, k := range []string{"solo.a", "solo.b"} {
		reqs = append(reqs, job.Request{Kind: k, Queue: "solo.q", Tenant: "solo"})
	}
	if _, err := e.client.EnqueueMany(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ kind, queue string }{{"py.resize", "py"}, {"py.mail", "py"}, {"solo.a", "solo.q"}, {"solo.b", "solo.q"}} {
		if got := e.counter("gaffer_job_enqueued_total", "kind", c.kind, "queue", c.queue); got != 1 {
			t.Errorf("enqueued %s in %s counted %v under its name, want 1", c.kind, c.queue, got)
		}
	}

	// 40 hostile tenants.
	const tenants, kinds, queues = 40, 256, 32
	reqs = reqs[:0]
	for i := range tenants {
		tenant := fmt.Sprintf("t%02d", i)
		var ks, qs []string
		for k := range kinds {
			ks = append(ks, fmt.Sprintf("%s.k%03d", tenant, k))
		}
		for q := range queues {
			qs = append(qs, fmt.Sprintf("%s.q%02d", tenant, q))
		}
		register(tenant+"-w", tenant, qs, ks)
		for _, k := range ks {
			for _, q := range qs[:4] {
				reqs = append(reqs, job.Request{Kind: k, Queue: q, Tenant: tenant, MaxAttempts: 1})
			}
		}
	}
	if err := labels.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.EnqueueMany(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	monitor, err := maintenance.NewQueueMonitor(maintenance.QueueMonitorConfig{Pool: e.st.Pool(), Metrics: e.metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := monitor.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	families, err := e.promReg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	hostileKinds, hostileQueues := map[string]bool{}, map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			series++
			for _, l := range m.GetLabel() {
				v := l.GetValue()
				if len(v) > 0 && v[0] == 't' && strings.Contains(v, ".k") {
					hostileKinds[v] = true
				}
				if len(v) > 0 && v[0] == 't' && strings.Contains(v, ".q") {
					hostileQueues[v] = true
				}
			}
		}
	}
	const budget = 100
	if series > budget {
		t.Fatalf("%d series after %d tenants registered %d kinds in %d queues each, budget %d", series, tenants, kinds, queues, budget)
	}
	if len(hostileKinds) > job.RemoteLabelBound.Kinds || len(hostileQueues) > job.RemoteLabelBound.Queues {
		t.Fatalf("tenants' names as labels: %d kinds, %d queues, bound %d and %d", len(hostileKinds), len(hostileQueues),
			job.RemoteLabelBound.Kinds, job.RemoteLabelBound.Queues)
	}
	// Round-robin: the named ones are each tenant's first, one per tenant.
	for k := range hostileKinds {
		if !strings.HasSuffix(k, ".k000") {
			t.Errorf("label kind %s: one tenant took a second slot before every tenant had one", k)
		}
	}
	if len(hostileKinds) == 0 {
		t.Error("no tenant's remote kind is a label")
	}
	// The operator's stay named whatever tenants register.
	if got := e.counter("gaffer_job_enqueued_total", "kind", "py.resize", "queue", "py"); got != 1 {
		t.Errorf("py.resize: %v", got)
	}
	t.Logf("%d series; tenants' labels: %d kinds, %d queues", series, len(hostileKinds), len(hostileQueues))
}
