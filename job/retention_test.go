package job_test

import (
	"context"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
)

func TestRetentionDeletesOnlyExpiredFinishedRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	old := e.enqueue(job.Request{Kind: "k"})
	recent := e.enqueue(job.Request{Kind: "k"})
	unfinished := e.enqueue(job.Request{Kind: "k", Delay: time.Hour})
	oldFailed := e.enqueue(job.Request{Kind: "k"})
	// Finish three of them, the database's way, then age two.
	e.exec(`UPDATE gaffer.jobs SET state = 'completed', finalized_at = now() WHERE id = ANY($1)`, []int64{old.ID, recent.ID})
	e.exec(`UPDATE gaffer.jobs SET state = 'failed', finalized_at = now() WHERE id = $1`, oldFailed.ID)
	e.exec(`INSERT INTO gaffer.dlq (tenant, job_id, kind, queue, priority, max_attempts, attempts, timeout_ms, args, errors, reason, failed_at)
	        VALUES ('default', $1, 'k', 'default', 0, 1, 1, 0, '{}', '[]', 'exhausted', now() - interval '20 days')`, oldFailed.ID)
	e.exec(`UPDATE gaffer.jobs SET finalized_at = now() - interval '25 hours', created_at = now() - interval '26 hours' WHERE id = ANY($1)`, []int64{old.ID, oldFailed.ID})
	// And an unfinished job that is old must never go.
	e.exec(`UPDATE gaffer.jobs SET created_at = now() - interval '30 days' WHERE id = $1`, unfinished.ID)

	c, err := job.NewRetentionCleaner(job.RetentionCleanerConfig{Store: e.st, BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	jobs, entries, err := c.RunOnce(ctx)
	if err != nil || jobs != 2 || entries != 1 {
		t.Fatalf("deleted %d jobs, %d entries, %v; want 2, 1", jobs, entries, err)
	}
	for id, want := range map[int64]bool{old.ID: false, oldFailed.ID: false, recent.ID: true, unfinished.ID: true} {
		_, err := e.client.Get(ctx, "", id)
		if (err == nil) != want {
			t.Errorf("job %d: exists=%v, want %v", id, err == nil, want)
		}
	}
	if _, err := job.NewRetentionCleaner(job.RetentionCleanerConfig{Store: e.st, JobRetention: -time.Hour}); err == nil {
		t.Fatal("negative retention accepted")
	}
}
