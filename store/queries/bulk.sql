-- Bulk job actions (store/bulk.go): cancel, retry and delete many jobs in
-- one bounded statement. {{where}} is the caller's selection (tenant,
-- states, queue, kind, cron entry, workflow run, ids) as positional
-- parameters, {{limit}} the most rows one statement touches. Each
-- statement picks the rows the action applies to (its eligible_*
-- condition), in id order, skipping rows another transaction holds (a
-- claim, a completion): it never waits on them, and they are left for a
-- later call, which the caller learns from bulk_more.

-- name: bulk_eligible_cancel
-- What a single cancel (request_cancel) acts on, less running jobs whose
-- cancel is already requested. Written as one arm per partial index
-- (jobs_due_idx, jobs_scheduled_idx, jobs_running_idx): the planner ORs
-- three index scans instead of reading the table (300,000 finished jobs
-- and 20 pending: 0.9 ms, against 320 ms for state IN (...)); a
-- sequence's held jobs are a fourth (jobs_held_idx).
((state IN ('pending', 'retrying') AND due) OR (state IN ('pending', 'retrying') AND NOT due)
 OR (state = 'running' AND NOT cancel_requested) OR state = 'held')

-- name: bulk_eligible_retry
-- What a single retry acts on: a retrying job waiting out its backoff
-- (one already due is claimed as it is), or a failed job whose DLQ entry
-- is unreplayed.
((state = 'retrying' AND NOT due)
 OR (state = 'failed' AND EXISTS (SELECT 1 FROM gaffer.dlq d WHERE d.job_id = gaffer.jobs.id AND d.replayed_at IS NULL)))

-- name: bulk_eligible_delete
-- Any job not running, unless it belongs to a workflow run still running:
-- the run waits on its steps' jobs (gaffer.sleep and gaffer.signal timers
-- among them) and reads its finished steps' results from their jobs.
(state <> 'running'
 AND (workflow_run IS NULL OR NOT EXISTS (SELECT 1 FROM gaffer.workflow_runs r WHERE r.id = gaffer.jobs.workflow_run AND r.state = 'running')))

-- name: bulk_count
-- The dry run: how many jobs the action would touch, counting at most
-- {{limit}}.
SELECT count(*) FROM (
    SELECT 1 FROM gaffer.jobs WHERE {{where}} AND {{eligible}} LIMIT {{limit}}
) c;

-- name: bulk_more
-- Whether jobs the action applies to remain after a call.
SELECT EXISTS (SELECT 1 FROM gaffer.jobs WHERE {{where}} AND {{eligible}});

-- name: bulk_cancel
-- request_cancel for many: pending and retrying jobs end cancelled at
-- once; running ones are marked and their nodes told. Returns each job
-- acted on and its state after.
WITH pick AS (
    SELECT id FROM gaffer.jobs WHERE {{where}} AND {{eligible}}
    ORDER BY id LIMIT {{limit}} FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE gaffer.jobs j
    SET state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END,
        finalized_at = CASE WHEN j.state = 'running' THEN j.finalized_at ELSE now() END,
        cancel_requested = true
    FROM pick WHERE j.id = pick.id
    RETURNING j.id, j.state, j.node
), tell AS (
    SELECT pg_notify('gaffer_control', json_build_object('op', 'cancel', 'id', id, 'node', node)::text)
    FROM upd WHERE state = 'running'
)
SELECT id, state, (SELECT count(*) FROM tell) FROM upd;

-- name: bulk_retry
-- retry_now and replay_dlq for many: a retrying job becomes due at once;
-- a failed job's unreplayed DLQ entry makes exactly one new job, linked
-- both ways, in the statement that marks the entry replayed. Returns each
-- job acted on and the job that will run (itself, or the replay).
WITH pick AS (
    SELECT id, state FROM gaffer.jobs WHERE {{where}} AND {{eligible}}
    ORDER BY id LIMIT {{limit}} FOR UPDATE SKIP LOCKED
), made_due AS (
    UPDATE gaffer.jobs j SET run_at = now(), due = true
    FROM pick WHERE j.id = pick.id AND pick.state = 'retrying'
    RETURNING j.id, j.queue
), entry AS (
    SELECT * FROM gaffer.dlq
    WHERE job_id IN (SELECT id FROM pick WHERE state = 'failed') AND replayed_at IS NULL
    ORDER BY id FOR UPDATE SKIP LOCKED
), made AS (
    INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, args, replay_of, workflow_run, step, fairness_key, limit_key, tags)
    SELECT tenant, kind, queue, priority, max_attempts, timeout_ms, args, id, workflow_run, step, fairness_key, limit_key,
           (SELECT o.tags FROM gaffer.jobs o WHERE o.id = entry.job_id) FROM entry ORDER BY id
    RETURNING id, replay_of, queue
), marked AS (
    UPDATE gaffer.dlq d SET replayed_at = now(), replay_job_id = made.id
    FROM made WHERE d.id = made.replay_of
    RETURNING d.job_id, made.id AS new_id
), wake AS (
    SELECT pg_notify('gaffer_jobs', q) FROM (SELECT queue AS q FROM made_due UNION SELECT queue FROM made) qs
)
SELECT id, id, (SELECT count(*) FROM wake) FROM made_due
UNION ALL
SELECT job_id, new_id, (SELECT count(*) FROM wake) FROM marked;

-- name: bulk_delete
-- Deletes the jobs; a failed job's DLQ entry stays (it holds its own copy
-- of the job, and can still be replayed).
WITH pick AS (
    SELECT id FROM gaffer.jobs WHERE {{where}} AND {{eligible}}
    ORDER BY id LIMIT {{limit}} FOR UPDATE SKIP LOCKED
)
DELETE FROM gaffer.jobs j USING pick WHERE j.id = pick.id
RETURNING j.id, j.state;

-- name: bulk_states
-- Where the ids a bulk call named but did not act on stand: $1 ids, $2
-- tenant (NULL: any). An id missing from the answer is not found (or
-- another tenant's).
SELECT j.id, j.state, j.cancel_requested, j.due,
       EXISTS (SELECT 1 FROM gaffer.dlq d WHERE d.job_id = j.id AND d.replayed_at IS NULL),
       coalesce((SELECT r.state = 'running' FROM gaffer.workflow_runs r WHERE r.id = j.workflow_run), false)
FROM gaffer.jobs j WHERE j.id = ANY($1::bigint[]) AND ($2::text IS NULL OR j.tenant = $2);
