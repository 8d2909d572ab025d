package job_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
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
	swept, err := c.RunOnce(ctx)
	if err != nil || swept.Jobs != 2 || swept.DLQEntries != 1 {
		t.Fatalf("deleted %d jobs, %d entries, %v; want 2, 1", swept.Jobs, swept.DLQEntries, err)
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

// Expired dashboard sessions are deleted by the leader's retention sweep,
// in batches, under the fence like its other deletes: a deposed leader's
// sweep deletes nothing. Red if the sessions were deleted outside the
// fenced transaction.
func TestRetentionDeletesExpiredSessionsUnderTheFence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.exec(`INSERT INTO gaffer.api_tokens (id, name, hash, tenant, scopes) VALUES ('tok_x', 'x', '\x01', 'default', '{jobs:read}')`)
	for i, expires := range []string{"-1 hour", "-1 minute", "-12 hours", "+1 hour"} {
		e.exec(`INSERT INTO gaffer.ui_sessions (id_hash, token_id, tenant, scopes, expires_at)
		        VALUES ($1, 'tok_x', 'default', '{jobs:read}', now() + $2::interval)`, []byte{byte(i)}, expires)
	}
	c, err := job.NewRetentionCleaner(job.RetentionCleanerConfig{Store: e.st, BatchSize: 2, Fence: deposedAtSessions{st: e.st}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunOnce(ctx); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a sweep deposed at the sessions: %v, want ErrFenced", err)
	}
	var n int
	if err := e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM gaffer.ui_sessions`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("%d sessions left after a sweep fenced off at the sessions (%v), want all 4", n, err)
	}

	c, _ = job.NewRetentionCleaner(job.RetentionCleanerConfig{Store: e.st, BatchSize: 2})
	swept, err := c.RunOnce(ctx)
	if err != nil || swept.Sessions != 3 {
		t.Fatalf("deleted %d sessions (%v), want the 3 expired", swept.Sessions, err)
	}
	var live int
	if err := e.st.Pool().QueryRow(ctx, `SELECT count(*) FROM gaffer.ui_sessions WHERE expires_at > now()`).Scan(&live); err != nil || live != 1 {
		t.Fatalf("%d live sessions left (%v), want 1", live, err)
	}
}

// deposedAtSessions is the fence of a leader deposed while it swept: it
// lets the job and DLQ batches commit (there are none to delete) and
// refuses to commit the first batch that deletes a session.
type deposedAtSessions struct{ st *store.Store }

func (f deposedAtSessions) Do(ctx context.Context, fn func(q store.DB) error) error {
	return f.st.InTx(ctx, func(q store.DB) error {
		var before int
		q.QueryRow(ctx, `SELECT count(*) FROM gaffer.ui_sessions`).Scan(&before)
		if err := fn(q); err != nil {
			return err
		}
		var after int
		q.QueryRow(ctx, `SELECT count(*) FROM gaffer.ui_sessions`).Scan(&after)
		if after != before {
			return store.ErrFenced
		}
		return nil
	})
}
