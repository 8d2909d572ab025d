package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/job"
)

func TestQueueMonitorGauges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for range 3 {
		e.enqueue(job.Request{Kind: "k", Queue: "mail"})
	}
	e.enqueue(job.Request{Kind: "k", Queue: "mail", Delay: time.Hour})
	e.exec(`UPDATE gaffer.jobs SET run_at = now() - interval '90 seconds' WHERE id = (SELECT min(id) FROM gaffer.jobs)`)
	m, err := maintenance.NewQueueMonitor(maintenance.QueueMonitorConfig{Pool: e.st.Pool(), Metrics: e.metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.counter("gaffer_queue_jobs", "queue", "mail", "state", "pending"); got != 4 {
		t.Fatalf("pending gauge %v, want 4", got)
	}
	if got := e.counter("gaffer_queue_oldest_due_age_seconds", "queue", "mail"); got < 89 || got > 120 {
		t.Fatalf("oldest due age %v, want ~90s", got)
	}
}
