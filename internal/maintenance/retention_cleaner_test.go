package maintenance_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/internal/maintenance"
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

	c, err := maintenance.NewRetentionCleaner(maintenance.RetentionCleanerConfig{Pool: e.st.Pool(), BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.RunOnce(ctx)
	if err != nil || d.Jobs != 2 || d.DLQEntries != 1 {
		t.Fatalf("deleted %+v, %v; want 2 jobs, 1 DLQ entry", d, err)
	}
	for id, want := range map[int64]bool{old.ID: false, oldFailed.ID: false, recent.ID: true, unfinished.ID: true} {
		_, err := e.client.Get(ctx, "", id)
		if (err == nil) != want {
			t.Errorf("job %d: exists=%v, want %v", id, err == nil, want)
		}
	}
	if _, err := maintenance.NewRetentionCleaner(maintenance.RetentionCleanerConfig{Pool: e.st.Pool(), JobRetention: -time.Hour}); err == nil {
		t.Fatal("negative retention accepted")
	}
}

// Idempotency keys expire after their retention (docs/api.md: 24 hours):
// the leader deletes them in batches, and a key past its retention is
// taken anew even before the sweep deletes it.
func TestRetentionDeletesExpiredIdempotencyKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, k := range []string{"old-1", "old-2", "fresh"} {
		if taken, _, err := e.st.ClaimIdempotencyKey(ctx, "t1", k, []byte("h"), time.Minute, 24*time.Hour); err != nil || !taken {
			t.Fatalf("claim %s: %v %v", k, taken, err)
		}
		if err := e.st.FinishIdempotencyKey(ctx, nil, "t1", k, 201, []byte(`{}`), "application/json"); err != nil {
			t.Fatal(err)
		}
	}
	e.exec(`UPDATE gaffer.idempotency_keys SET created_at = now() - interval '25 hours' WHERE key LIKE 'old-%'`)

	// Expired but not yet swept: a new request with the key runs anew.
	taken, _, err := e.st.ClaimIdempotencyKey(ctx, "t1", "old-1", []byte("other"), time.Minute, 24*time.Hour)
	if err != nil || !taken {
		t.Fatalf("claim of an expired key: taken=%v err=%v, want taken", taken, err)
	}
	// Fresh: replayed, not taken.
	if taken, prev, err := e.st.ClaimIdempotencyKey(ctx, "t1", "fresh", []byte("h"), time.Minute, 24*time.Hour); err != nil || taken || prev.Status != 201 {
		t.Fatalf("claim of a fresh key: taken=%v status=%d err=%v, want its stored 201", taken, prev.Status, err)
	}

	c, err := maintenance.NewRetentionCleaner(maintenance.RetentionCleanerConfig{Pool: e.st.Pool(), BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.RunOnce(ctx)
	if err != nil || d.IdempotencyKeys != 1 {
		t.Fatalf("deleted %+v, %v; want 1 idempotency key (old-2)", d, err)
	}
	var left []string
	rows, _ := e.st.Pool().Query(ctx, `SELECT key FROM gaffer.idempotency_keys ORDER BY key`)
	for rows.Next() {
		var k string
		rows.Scan(&k)
		left = append(left, k)
	}
	if strings.Join(left, ",") != "fresh,old-1" {
		t.Fatalf("keys left: %v, want fresh,old-1", left)
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
	c, err := maintenance.NewRetentionCleaner(maintenance.RetentionCleanerConfig{Pool: e.st.Pool(), BatchSize: 2, Fence: deposedAtSessions{st: e.st}})
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

	c, _ = maintenance.NewRetentionCleaner(maintenance.RetentionCleanerConfig{Pool: e.st.Pool(), BatchSize: 2})
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

func (f deposedAtSessions) Do(ctx context.Context, fn func(q pgx.Tx) error) error {
	return f.st.InTx(ctx, func(q pgx.Tx) error {
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
