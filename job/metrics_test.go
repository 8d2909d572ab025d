package job_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/job"
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
