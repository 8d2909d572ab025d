package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// strings runs a query returning one text column and returns its
// values, sorted.
func (e *env) strings(sql string, args ...any) []string {
	e.t.Helper()
	rows, err := e.st.Pool().Query(context.Background(), sql, args...)
	if err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	slices.Sort(out)
	return out
}

func (e *env) sweep(cfg maintenance.RetentionCleanerConfig) maintenance.Deleted {
	e.t.Helper()
	cfg.Pool = e.st.Pool()
	c, err := maintenance.NewRetentionCleaner(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	d, err := c.RunOnce(context.Background())
	if err != nil {
		e.t.Fatalf("retention sweep: %v", err)
	}
	return d
}

// addRun inserts a workflow run named name in state, finished (or, while
// running, created) age ago, with one step, and returns its id.
func (e *env) addRun(name, state, age string) int64 {
	e.t.Helper()
	var id int64
	finished := "now() - $3::interval"
	if state == "running" {
		finished = "NULL"
	}
	err := e.st.Pool().QueryRow(context.Background(), fmt.Sprintf(`INSERT INTO gaffer.workflow_runs (name, state, created_at, finished_at)
		VALUES ($1, $2, now() - $3::interval - interval '1 hour', %s) RETURNING id`, finished), name, state, age).Scan(&id)
	if err != nil {
		e.t.Fatal(err)
	}
	e.exec(`INSERT INTO gaffer.workflow_steps (run_id, name, kind, queue, args, priority, max_attempts, timeout_ms, deps_left, state)
		VALUES ($1, 'a', 'k', 'default', '{}', 0, 1, 0, 0, 'completed')`, id)
	return id
}

// addDLQEntry dead-letters a job of step "a" of run, failed age ago, and
// replayed unless waiting.
func (e *env) addDLQEntry(run int64, age string, waiting bool) {
	e.t.Helper()
	e.exec(`INSERT INTO gaffer.dlq (tenant, job_id, kind, queue, priority, max_attempts, attempts, timeout_ms, args, errors, reason,
	        failed_at, workflow_run, step, replayed_at, replay_job_id)
	        VALUES ('default', $1, 'k', 'default', 0, 1, 1, 0, '{}', '[]', 'exhausted', now() - $2::interval, $1, 'a',
	                CASE WHEN $3 THEN NULL ELSE now() END, CASE WHEN $3 THEN NULL ELSE 0 END)`, run, age, waiting)
}

// Finished workflow runs go WorkflowRetention after they finished, with
// their steps; running ones stay however old. A run a step's unfinished
// job still reports to stays, and so does a failed run while a DLQ entry
// of one of its steps waits to be replayed (the replay would resume it) —
// until that entry's own retention ends, when both go in one sweep. Red
// without the delete (nothing goes), and without either exception (the
// runs they hold go).
func TestRetentionDeletesFinishedWorkflowRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old, recent := "8 days", "1 day"
	e.addRun("completed-old", "completed", old)
	e.addRun("cancelled-old", "cancelled", old)
	e.addRun("failed-old", "failed", old)
	e.addRun("completed-recent", "completed", recent)
	e.addRun("failed-recent", "failed", recent)
	e.addRun("running-old", "running", "30 days")
	// A step's job outlived its run's cancellation: still pending.
	late := e.addRun("cancelled-old-late-step", "cancelled", old)
	e.exec(`INSERT INTO gaffer.jobs (kind, workflow_run, step) VALUES ('k', $1, 'a')`, late)
	// Failed runs with a step in the DLQ: replayable, or replayed already.
	replayable := e.addRun("failed-old-replayable", "failed", old)
	e.addDLQEntry(replayable, "8 days", true)
	replayed := e.addRun("failed-old-replayed", "failed", old)
	e.addDLQEntry(replayed, "8 days", false)
	// A completed run's allow_failure step in the DLQ: a replay cannot
	// resume a completed run, so the entry does not hold it.
	allowed := e.addRun("completed-old-allowed-failure", "completed", old)
	e.addDLQEntry(allowed, "8 days", true)

	d := e.sweep(maintenance.RetentionCleanerConfig{BatchSize: 2})
	if d.WorkflowRuns != 5 {
		t.Errorf("deleted %d workflow runs, want 5", d.WorkflowRuns)
	}
	want := []string{"cancelled-old-late-step", "completed-recent", "failed-old-replayable", "failed-recent", "running-old"}
	if left := e.strings(`SELECT name FROM gaffer.workflow_runs`); !slices.Equal(left, want) {
		t.Fatalf("runs left: %v, want %v", left, want)
	}
	if n := e.strings(`SELECT r.name FROM gaffer.workflow_steps s LEFT JOIN gaffer.workflow_runs r ON r.id = s.run_id WHERE r.id IS NULL`); len(n) != 0 {
		t.Fatalf("%d steps outlived their runs", len(n))
	}

	// The waiting entry's retention ends: the entry and its run go.
	d = e.sweep(maintenance.RetentionCleanerConfig{DLQRetention: 7 * 24 * time.Hour})
	if d.DLQEntries != 3 || d.WorkflowRuns != 1 {
		t.Errorf("after the DLQ entries expired: deleted %d entries and %d runs, want 3 and 1", d.DLQEntries, d.WorkflowRuns)
	}
	if slices.Contains(e.strings(`SELECT name FROM gaffer.workflow_runs`), "failed-old-replayable") {
		t.Error("the failed run stayed after its DLQ entry was deleted")
	}
}

// Rows of nodes that left or were lost go DeadNodeRetention after they
// left; live nodes stay however long ago they started. Red without the
// delete.
func TestRetentionDeletesDeadNodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, n := range []struct{ id, state, left string }{
		{"gone-long-ago", "dead", "8 days"}, {"lost-long-ago", "dead", "10 days"}, {"gone-yesterday", "dead", "1 day"},
		{"active", "active", ""}, {"draining", "draining", ""},
	} {
		e.exec(`INSERT INTO gaffer.nodes (id, hostname, version, state, started_at, last_seen, left_at, left_reason)
		        VALUES ($1, 'h', 'v', $2, now() - interval '30 days', now(), now() - nullif($3, '')::interval,
		                CASE WHEN $2 = 'dead' THEN 'stopped' END)`, n.id, n.state, n.left)
	}
	if d := e.sweep(maintenance.RetentionCleanerConfig{BatchSize: 1}); d.DeadNodes != 2 {
		t.Errorf("deleted %d node rows, want 2", d.DeadNodes)
	}
	if left := e.strings(`SELECT id FROM gaffer.nodes`); !slices.Equal(left, []string{"active", "draining", "gone-yesterday"}) {
		t.Fatalf("nodes left: %v", left)
	}
}

// Cron occurrence records go CronHistoryRetention after they were
// recorded, every one of them in one sweep, batch after batch (the
// scheduler used to delete at most 10,000 an hour, less than an entry
// firing every second for three entries records). Red without the delete.
func TestRetentionDeletesOldCronHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`INSERT INTO gaffer.cron_occurrences (tenant, entry, scheduled_at, status, recorded_at)
	        SELECT 'default', 'tick', now() - g * interval '1 hour', 'fired', now() - g * interval '1 hour' + interval '30 minutes'
	        FROM generate_series(1, 10 * 24) g`)
	d := e.sweep(maintenance.RetentionCleanerConfig{BatchSize: 7, CronHistoryRetention: 3 * 24 * time.Hour})
	if d.CronOccurrences != 7*24 {
		t.Errorf("deleted %d occurrences, want %d (older than 3 days)", d.CronOccurrences, 7*24)
	}
	var kept, oldest int
	e.st.Pool().QueryRow(context.Background(), `SELECT count(*), coalesce(max(extract(epoch FROM now() - recorded_at)) / 3600, 0)::int
		FROM gaffer.cron_occurrences`).Scan(&kept, &oldest)
	if kept != 3*24 || oldest > 3*24 {
		t.Fatalf("%d occurrences kept, the oldest %dh old; want %d, none over 72h", kept, oldest, 3*24)
	}
}

// Revoked tokens' records go RevokedTokenRetention after the revocation;
// tokens in force stay however old. Red without the delete.
func TestRetentionDeletesOldRevokedTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i, tok := range []struct{ id, revoked string }{
		{"tok_revoked_long_ago", "31 days"}, {"tok_revoked_recently", "1 day"}, {"tok_in_force", ""},
	} {
		e.exec(`INSERT INTO gaffer.api_tokens (id, name, hash, tenant, scopes, created_at, revoked_at)
		        VALUES ($1, $1, $2, 'default', '{jobs:read}', now() - interval '100 days', now() - nullif($3, '')::interval)`,
			tok.id, []byte{byte(i)}, tok.revoked)
	}
	if d := e.sweep(maintenance.RetentionCleanerConfig{}); d.RevokedTokens != 1 {
		t.Errorf("deleted %d tokens, want 1", d.RevokedTokens)
	}
	if left := e.strings(`SELECT id FROM gaffer.api_tokens`); !slices.Equal(left, []string{"tok_in_force", "tok_revoked_recently"}) {
		t.Fatalf("tokens left: %v", left)
	}
}

// errRolledBack makes rollbackFence roll its transaction back.
var errRolledBack = errors.New("rolled back")

// rollbackFence runs each batch in a transaction it then rolls back, and
// reports success: whatever a sweep deletes outside the fence's
// transaction stays deleted, and nothing else does.
type rollbackFence struct{ st *store.Store }

func (f rollbackFence) Do(ctx context.Context, fn func(q pgx.Tx) error) error {
	err := f.st.InTx(ctx, func(q pgx.Tx) error {
		if err := fn(q); err != nil {
			return err
		}
		return errRolledBack
	})
	if errors.Is(err, errRolledBack) {
		return nil
	}
	return err
}

// Every retention delete runs in the fence's transaction, so a deposed
// leader's sweep deletes nothing: with a fence that rolls every batch
// back, every table is left as it was. Red if any sweep wrote through the
// pool instead of the fenced transaction.
func TestRetentionDeletesOnlyUnderTheFence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	j := e.enqueue(job.Request{Kind: "k"})
	e.exec(`UPDATE gaffer.jobs SET state = 'completed', finalized_at = now() - interval '30 days' WHERE id = $1`, j.ID)
	run := e.addRun("old", "failed", "30 days")
	e.addDLQEntry(run, "30 days", false)
	e.exec(`INSERT INTO gaffer.idempotency_keys (tenant, key, request_hash, created_at) VALUES ('t', 'k', '\x00', now() - interval '30 days')`)
	e.exec(`INSERT INTO gaffer.cron_occurrences (tenant, entry, scheduled_at, status, recorded_at) VALUES ('t', 'e', now(), 'fired', now() - interval '30 days')`)
	e.exec(`INSERT INTO gaffer.nodes (id, hostname, version, state, left_at) VALUES ('n', 'h', 'v', 'dead', now() - interval '30 days')`)
	e.exec(`INSERT INTO gaffer.api_tokens (id, name, hash, tenant, scopes, revoked_at) VALUES ('tok_x', 'x', '\x01', 'default', '{jobs:read}', now() - interval '60 days')`)
	e.exec(`INSERT INTO gaffer.ui_sessions (id_hash, token_id, tenant, scopes, expires_at) VALUES ('\x02', 'tok_x', 'default', '{jobs:read}', now() - interval '1 day')`)
	e.exec(`INSERT INTO gaffer.webhook_secrets (id, tenant, key, expires_at) VALUES ('whsec_x', 't', $1, now() - interval '1 day')`, make([]byte, 32))
	const count = `SELECT (SELECT count(*) FROM gaffer.jobs) + (SELECT count(*) FROM gaffer.dlq) + (SELECT count(*) FROM gaffer.workflow_runs)
		+ (SELECT count(*) FROM gaffer.idempotency_keys) + (SELECT count(*) FROM gaffer.cron_occurrences) + (SELECT count(*) FROM gaffer.nodes)
		+ (SELECT count(*) FROM gaffer.api_tokens) + (SELECT count(*) FROM gaffer.ui_sessions) + (SELECT count(*) FROM gaffer.webhook_secrets)`
	var before, after int
	e.st.Pool().QueryRow(ctx, count).Scan(&before)

	d := e.sweep(maintenance.RetentionCleanerConfig{Fence: rollbackFence{st: e.st}})
	if d.Jobs != 1 || d.DLQEntries != 1 || d.WorkflowRuns != 1 || d.IdempotencyKeys != 1 || d.CronOccurrences != 1 ||
		d.DeadNodes != 1 || d.RevokedTokens != 1 || d.Sessions != 1 || d.WebhookSecrets != 1 {
		t.Fatalf("the sweep found %+v; want one row of each table (else this test proves nothing)", d)
	}
	e.st.Pool().QueryRow(ctx, count).Scan(&after)
	if after != before {
		t.Fatalf("%d rows before a sweep whose every transaction rolled back, %d after: a delete ran outside the fence", before, after)
	}
}

// A finished batch goes once its callback was enqueued longer ago than
// the job retention; an open, closed or recently finished one stays.
func TestRetentionDeletesFinishedBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	add := func(state string, finishedAgo string) {
		e.exec(`INSERT INTO gaffer.batches (tenant, callback_kind, state, callback_job_id, finished_at)
			VALUES ('default', 'cb', $1, CASE WHEN $1 = 'finished' THEN 1 END, now() - $2::interval)`, state, finishedAgo)
	}
	add("finished", "2 days")
	add("finished", "3 days")
	add("finished", "1 hour")
	add("closed", "5 days")
	add("open", "5 days")
	d := e.sweep(maintenance.RetentionCleanerConfig{BatchSize: 1})
	if d.Batches != 2 {
		t.Errorf("deleted %d batches, want 2", d.Batches)
	}
	if left := e.strings(`SELECT state || ' ' || (finished_at > now() - interval '1 day') FROM gaffer.batches ORDER BY id`); !slices.Equal(left, []string{"closed false", "finished true", "open false"}) {
		t.Errorf("left %v", left)
	}
}
