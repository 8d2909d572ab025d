-- Workflow queries. The run's progress is driven by the triggers of
-- migrations 0005, 0007 and 0010; these create, read, cancel and signal runs.

-- name: insert_workflow_run
INSERT INTO gaffer.workflow_runs (tenant, name) VALUES ($1, $2) RETURNING id;

-- name: insert_workflow_steps
-- $1 run, then parallel arrays, one element per step.
INSERT INTO gaffer.workflow_steps (run_id, name, type, kind, queue, args, priority, max_attempts, timeout_ms, wait_ms,
                                   depends_on, allow_failure, deps_left)
SELECT $1, s.name, s.type, s.kind, s.queue, s.args, s.priority, s.max_attempts, s.timeout_ms, s.wait_ms,
       coalesce((SELECT array_agg(d) FROM jsonb_array_elements_text(s.deps) d), '{}'), s.allow_failure,
       jsonb_array_length(s.deps)
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::json[], $7::smallint[], $8::integer[], $9::bigint[],
            $10::bigint[], $11::jsonb[], $12::boolean[])
    AS s(name, type, kind, queue, args, priority, max_attempts, timeout_ms, wait_ms, deps, allow_failure);

-- name: start_workflow
SELECT gaffer.workflow_start_ready($1);

-- name: get_workflow_run
-- A run completed since migration 0034 keeps no copy of its output: it is
-- read from its steps (gaffer.workflow_output).
SELECT id, tenant, name, state, coalesce(output, gaffer.workflow_output(id)), coalesce(error, ''), created_at, finished_at
FROM gaffer.workflow_runs
WHERE id = $1 AND ($2::text IS NULL OR tenant = $2);

-- name: list_workflow_runs
-- $1 tenant (NULL: all), $2 state (NULL: any), $3 before id, $4 limit.
SELECT id, tenant, name, state, coalesce(output, gaffer.workflow_output(id)), coalesce(error, ''), created_at, finished_at
FROM gaffer.workflow_runs
WHERE ($1::text IS NULL OR tenant = $1) AND ($2::text IS NULL OR state = $2) AND ($3::bigint IS NULL OR id < $3)
ORDER BY id DESC
LIMIT $4;

-- name: get_workflow_steps
SELECT s.name, s.type, s.kind, s.queue, s.depends_on, s.allow_failure, s.state, coalesce(s.job_id, 0),
       coalesce(j.attempt, 0), s.result, coalesce(s.error, ''), s.started_at, s.finished_at, coalesce(s.cancel_reason, '')
FROM gaffer.workflow_steps s
LEFT JOIN gaffer.jobs j ON j.id = s.job_id
WHERE s.run_id = $1
ORDER BY s.started_at NULLS LAST, s.name;

-- name: lock_workflow_jobs
-- The unfinished jobs of a running run's active steps, locked in id order,
-- before the run: the statement that finishes a step's job locks the job
-- and only then, in its trigger, the run, so whoever takes both takes
-- them in that order. $1 run, $2 tenant (NULL: any).
SELECT j.id FROM gaffer.jobs j
WHERE j.id IN (SELECT s.job_id FROM gaffer.workflow_steps s JOIN gaffer.workflow_runs r ON r.id = s.run_id
               WHERE s.run_id = $1 AND s.state = 'active' AND r.state = 'running' AND ($2::text IS NULL OR r.tenant = $2))
  AND j.state IN ('pending', 'retrying', 'running')
ORDER BY j.id
FOR UPDATE OF j;

-- name: lock_workflow_run
SELECT state FROM gaffer.workflow_runs WHERE id = $1 AND ($2::text IS NULL OR tenant = $2) FOR UPDATE;

-- name: count_unlocked_workflow_jobs
-- Inside a transaction holding the run: the unfinished jobs of its active
-- steps that are not among $2, those locked before the run. A step that
-- started between the two locks has one.
SELECT count(*) FROM gaffer.workflow_steps s JOIN gaffer.jobs j ON j.id = s.job_id
WHERE s.run_id = $1 AND s.state = 'active' AND j.state IN ('pending', 'retrying', 'running')
  AND NOT (j.id = ANY (coalesce($2::bigint[], '{}')));

-- name: cancel_workflow_run
-- Inside a transaction holding the run and its active steps' unfinished
-- jobs: the run and its waiting steps end cancelled; the jobs of active
-- steps are cancelled (pending, retrying) or told to stop (running).
WITH run AS (
    UPDATE gaffer.workflow_runs SET state = 'cancelled', finished_at = now(), error = 'cancelled'
    WHERE id = $1 RETURNING id
), waiting AS (
    UPDATE gaffer.workflow_steps SET state = 'cancelled', cancel_reason = 'run cancelled', finished_at = now()
    WHERE run_id = $1 AND state = 'waiting'
    RETURNING name
), jobs AS (
    UPDATE gaffer.jobs
    SET state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END,
        finalized_at = CASE WHEN state = 'running' THEN finalized_at ELSE now() END,
        cancel_requested = true
    WHERE id IN (SELECT job_id FROM gaffer.workflow_steps WHERE run_id = $1 AND state = 'active')
      AND state IN ('pending', 'retrying', 'running')
    RETURNING id, state, node
), tell AS (
    SELECT pg_notify('gaffer_control', json_build_object('op', 'cancel', 'id', id, 'node', node)::text)
    FROM jobs WHERE state = 'running'
)
SELECT (SELECT count(*) FROM waiting), (SELECT count(*) FROM jobs), (SELECT count(*) FROM tell);

-- name: signal_workflow_step
-- Completes a waiting signal step's timer job with the payload as its
-- result; the job trigger then moves the run on.
UPDATE gaffer.jobs j
SET state = 'completed', finalized_at = now(), result = $4
FROM gaffer.workflow_steps s
JOIN gaffer.workflow_runs r ON r.id = s.run_id
WHERE s.run_id = $1 AND s.name = $2 AND ($3::text IS NULL OR r.tenant = $3)
  AND s.type = 'signal' AND s.state = 'active' AND j.id = s.job_id AND j.state IN ('pending', 'retrying')
RETURNING j.id;

-- name: get_workflow_step_state
SELECT s.type, s.state FROM gaffer.workflow_steps s JOIN gaffer.workflow_runs r ON r.id = s.run_id
WHERE s.run_id = $1 AND s.name = $2 AND ($3::text IS NULL OR r.tenant = $3);

-- name: delete_finished_workflow_runs
-- Retention: $1 age ms, $2 batch size. A run finished longer ago than $1
-- goes with its steps (ON DELETE CASCADE), unless a job of one of its
-- steps is still unfinished (a step that outlived its run's failure or
-- cancellation records its end on the run), or it failed and an
-- unreplayed DLQ entry of one of its steps could still resume it.
WITH doomed AS (
    SELECT r.id FROM gaffer.workflow_runs r
    WHERE r.state <> 'running' AND r.finished_at < now() - $1 * interval '1 millisecond'
      AND NOT EXISTS (SELECT 1 FROM gaffer.jobs j
                      WHERE j.workflow_run = r.id AND j.state NOT IN ('completed', 'failed', 'cancelled'))
      AND NOT (r.state = 'failed' AND EXISTS (SELECT 1 FROM gaffer.dlq d
                                              WHERE d.workflow_run = r.id AND d.replayed_at IS NULL))
    ORDER BY r.finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM gaffer.workflow_runs r USING doomed WHERE r.id = doomed.id;

-- name: step_inputs
-- The inputs of step jobs that carry them by reference (jobs.inputs_from),
-- read from their runs' steps (gaffer.step_inputs): $1 job ids, in the
-- order they are wanted, $2 the bytes of inputs to send at most. Each row
-- is a job, whether its inputs are sent, and its inputs: sent while the
-- sizes so far (its own too) are within $2, and always for the first
-- job; NULL past it (and for a job whose run is gone).
SELECT id, ord = 1 OR upto <= $2, CASE WHEN ord = 1 OR upto <= $2 THEN inputs END
FROM (
    SELECT c.id, c.ord, x.inputs, coalesce(octet_length(x.inputs::text), 0) AS size,
           sum(coalesce(octet_length(x.inputs::text), 0)) OVER (ORDER BY c.ord) AS upto
    FROM unnest($1::bigint[]) WITH ORDINALITY AS c(id, ord)
    JOIN gaffer.jobs j ON j.id = c.id
    CROSS JOIN LATERAL (SELECT gaffer.step_inputs(j.workflow_run, j.step, j.inputs_from) AS inputs) x
    WHERE j.inputs_from IS NOT NULL
) t
ORDER BY ord;
