package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/gafferhq/gaffer/cron"
)

// settleAndCheck stops the cron entries, waits for the healed cluster to
// finish every job and run, and checks the invariants.
func (h *harness) settleAndCheck() Report {
	ctx := context.Background()
	t := h.t
	crons := cron.NewClient(h.pool)
	for _, n := range h.cronNames {
		if _, err := crons.Pause(ctx, "", n); err != nil {
			t.Fatalf("pause cron entry %s: %v", n, err)
		}
	}
	h.mu.Lock()
	ids := append([]int64(nil), h.accepted...)
	runs := make([]int64, len(h.runs))
	for i, tr := range h.runs {
		runs[i] = tr.id
	}
	r := Report{Violations: append([]string(nil), h.violations...)}
	h.mu.Unlock()
	v := func(format string, args ...any) { r.Violations = append(r.Violations, fmt.Sprintf(format, args...)) }
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := h.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	h.closeBatches(ctx)
	deadline := time.Now().Add(h.o.Profile.Settle)
	for {
		open := count(`SELECT count(*) FROM gaffer.jobs WHERE state IN ('pending', 'held', 'running', 'retrying')`)
		running := count(`SELECT count(*) FROM gaffer.workflow_runs WHERE state = 'running'`)
		if open == 0 && running == 0 {
			break
		}
		if time.Now().After(deadline) {
			v("the healed cluster left %d jobs unfinished and %d workflow runs running after %s", open, running, h.o.Profile.Settle)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	h.logf("settled")

	// No accepted job is lost.
	if n := count(`SELECT count(*) FROM gaffer.jobs WHERE id = ANY($1)`, ids); n != len(ids) {
		v("%d of %d accepted jobs no longer exist", len(ids)-n, len(ids))
	}
	if n := count(`SELECT count(*) FROM gaffer.jobs WHERE id = ANY($1) AND state NOT IN ('completed', 'failed', 'cancelled')`, ids); n != 0 {
		v("%d accepted jobs did not finish", n)
	}
	// Exactly one accepted completion per job, from its current attempt,
	// and its transactional effect exactly once.
	if n := count(`SELECT count(*) FROM (SELECT job_id FROM test_completions GROUP BY job_id HAVING count(*) > 1) d`); n != 0 {
		v("%d jobs have more than one accepted completion", n)
	}
	if n := count(`SELECT count(*) FROM gaffer.jobs j JOIN chaos_tx_effects e ON e.job_id = j.id WHERE e.attempt <> j.attempt`); n != 0 {
		v("%d completions were accepted from an attempt that was not the job's last (stale)", n)
	}
	// Grouped, not a count per job: a long run has 100,000 of each.
	if n := count(`SELECT count(*) FROM gaffer.jobs j
		LEFT JOIN (SELECT job_id, count(*) AS n FROM chaos_tx_effects GROUP BY job_id) e ON e.job_id = j.id
		WHERE j.kind = 'chaos.work' AND j.state = 'completed' AND coalesce(e.n, 0) <> 1`); n != 0 {
		v("%d completed jobs do not have exactly one effect written in their completion transaction", n)
	}
	if n := count(`SELECT count(*) FROM chaos_tx_effects e JOIN gaffer.jobs j ON j.id = e.job_id WHERE j.state <> 'completed'`); n != 0 {
		v("%d transactional effects belong to jobs that did not complete", n)
	}
	// Cron: every instant from the first to the last handled fired once.
	for _, name := range h.cronNames {
		var fired, jobs, distinct, other int
		var first, last *time.Time
		h.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'fired'), count(*) FILTER (WHERE status <> 'fired'),
			min(scheduled_at), max(scheduled_at) FROM gaffer.cron_occurrences WHERE entry = $1 AND status <> 'triggered'`, name).Scan(&fired, &other, &first, &last)
		h.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT cron_at) FROM gaffer.jobs WHERE cron_entry = $1`, name).Scan(&jobs, &distinct)
		if first == nil {
			v("cron entry %s never fired", name)
			continue
		}
		span := int(last.Sub(*first)/time.Second) + 1
		if fired != span || jobs != fired || distinct != jobs || other != 0 {
			v("cron entry %s: %d instants from first to last, %d fired, %d jobs (%d distinct), %d missed or skipped", name, span, fired, jobs, distinct, other)
		}
		r.CronOccurrences += fired
	}
	// DLQ: every failed job once; every replay one job.
	if n := count(`SELECT count(*) FROM gaffer.jobs j WHERE j.state = 'failed' AND NOT EXISTS (SELECT 1 FROM gaffer.dlq d WHERE d.job_id = j.id)`); n != 0 {
		v("%d failed jobs have no DLQ entry", n)
	}
	if n := count(`SELECT count(*) FROM gaffer.dlq d WHERE NOT EXISTS (SELECT 1 FROM gaffer.jobs j WHERE j.id = d.job_id AND j.state = 'failed')`); n != 0 {
		v("%d DLQ entries belong to jobs that are not failed", n)
	}
	if n := count(`SELECT count(*) FROM (SELECT replay_of FROM gaffer.jobs WHERE replay_of IS NOT NULL GROUP BY replay_of HAVING count(*) > 1) d`); n != 0 {
		v("%d DLQ entries were replayed into more than one job", n)
	}
	if n := count(`SELECT count(*) FROM gaffer.dlq d WHERE d.replay_job_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM gaffer.jobs j WHERE j.id = d.replay_job_id AND j.replay_of = d.id)`); n != 0 {
		v("%d replayed DLQ entries do not link to their job", n)
	}
	// Workflows: every run ended as its plan wants, no step started
	// before its dependencies were done, inputs are their results.
	h.checkWorkflows(ctx, &r, v)
	// Batches: each one's callback exactly once, after its jobs.
	h.checkBatches(ctx, &r, v)
	// Limits: no key ever ran more than its limit at once.
	h.checkLimit(ctx, &r, v)
	// Sequences: one job of a sequence at a time, in enqueue order.
	h.checkSequences(ctx, &r, v)
	// SIGTERM: no attempt the stopped node held was lost.
	h.checkSigterms(ctx, &r, v)
	// No claims by a node between its drain order and its restart: none
	// that began after the order committed (a claim reads the order as it
	// begins).
	h.mu.Lock()
	drains := append([]window(nil), h.drains...)
	h.mu.Unlock()
	for _, w := range drains {
		var n int
		var first string
		if err := h.pool.QueryRow(ctx, `SELECT count(*), coalesce(to_char(min(began), 'HH24:MI:SS.MS'), '')
			FROM test_claims WHERE node = $1 AND began > $2 AND began < $3`, w.node, w.from, w.to).Scan(&n, &first); err != nil {
			h.t.Fatalf("claims while draining: %v", err)
		}
		if n != 0 {
			v("%s claimed %d jobs while draining (the order committed by %s; the first claim began %s)", w.node, n, w.from.Format("15:04:05.000"), first)
		}
	}

	r.Profile, r.Seed = h.o.Profile.Name, h.o.Seed
	r.Jobs = len(ids)
	r.Completed = count(`SELECT count(*) FROM gaffer.jobs WHERE state = 'completed'`)
	r.Failed = count(`SELECT count(*) FROM gaffer.jobs WHERE state = 'failed'`)
	r.Workflows = len(runs)
	r.WorkflowSteps = count(`SELECT count(*) FROM gaffer.workflow_steps WHERE run_id = ANY($1)`, runs)
	r.Executions = count(`SELECT count(*) FROM chaos_effects`)
	r.ExternalDuplicates = count(`SELECT count(*) - count(DISTINCT job_id) FROM chaos_effects`)
	for _, s := range h.nodes {
		r.StaleRefused += int(s.child.Metric("gaffer_job_stale_rejected_total", "", ""))
	}
	h.mu.Lock()
	r.Replays = len(h.replays)
	r.StepReplays, r.StepCancels = h.stepReplays, h.stepCancels
	r.SigtermsAimed = h.aimed
	r.EtcdOutageRerun = append([]float64(nil), h.reruns...)
	r.Faults = h.faults
	r.Recovery = append([]float64(nil), h.recovery...)
	r.FaultLog = append([]string(nil), h.faultLog...)
	h.mu.Unlock()
	return r
}
