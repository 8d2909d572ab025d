-- Batch queries (store/batches.go); the routines that close, cancel and
-- settle a batch are in schema/batches.sql.

-- name: insert_batch
-- $1 tenant, $2 callback kind, $3 queue, $4 args, $5 priority,
-- $6 max_attempts, $7 timeout_ms.
INSERT INTO gaffer.batches (tenant, callback_kind, callback_queue, callback_args, callback_priority,
                            callback_max_attempts, callback_timeout_ms)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING {{batch}};

-- name: batch_admit
-- Before jobs are inserted into batch $1 of tenant $2, in their
-- transaction: counts $3 more jobs into it if it is open. The row lock
-- this takes is held to commit, so a close waits for the jobs to be in
-- (and then counts them); an add after a close sees the batch closed and
-- gets no row. Then the transaction's gaffer.batch_id names the batch
-- for the inserts (batch_job_added) until it is cleared.
WITH upd AS (
    UPDATE gaffer.batches SET total = total + $3
    WHERE id = $1 AND tenant = $2 AND state = 'open'
    RETURNING id
)
SELECT set_config('gaffer.batch_id', id::text, true) FROM upd;

-- name: batch_added
-- After the inserts: no later insert of the transaction joins the batch.
SELECT set_config('gaffer.batch_id', '', true);

-- name: batch_state
SELECT state FROM gaffer.batches WHERE id = $1 AND tenant = $2;

-- name: get_batch
SELECT {{batch}} FROM gaffer.batches WHERE id = $1 AND ($2::text IS NULL OR tenant = $2);

-- name: close_batch
SELECT {{batch:b}} FROM gaffer.batch_close($2, $1) b WHERE b.id IS NOT NULL;

-- name: cancel_batch
SELECT {{batch:b}} FROM gaffer.batch_cancel($2, $1) b WHERE b.id IS NOT NULL;

-- name: list_batches
-- $1 tenant (NULL: every tenant), $2 state (NULL: any), $3 before id
-- (0: from the newest), $4 limit.
SELECT {{batch}} FROM gaffer.batches
WHERE ($1::text IS NULL OR tenant = $1) AND ($2::text IS NULL OR state = $2) AND ($3 = 0 OR id < $3)
ORDER BY id DESC
LIMIT $4;

-- name: batch_job_states
-- A batch's unfinished jobs by state (its final ones are the batch's
-- counts), capped at $2 per call.
SELECT state, count(*) FROM (
    SELECT state FROM gaffer.jobs WHERE batch_id = $1 AND state IN ('pending', 'held', 'running', 'retrying') LIMIT $2
) s GROUP BY state;

-- name: batch_callback_lags
-- gaffer bench batches: for each finished batch whose callback is of kind
-- $1 and has started, the time from its last job's final state to its
-- callback's start (database clock), in ms.
SELECT extract(epoch FROM cb.attempted_at - last.at) * 1000
FROM gaffer.batches b
JOIN gaffer.jobs cb ON cb.id = b.callback_job_id
CROSS JOIN LATERAL (SELECT max(finalized_at) AS at FROM gaffer.jobs WHERE batch_id = b.id) last
WHERE b.callback_kind = $1 AND b.state = 'finished' AND cb.attempted_at IS NOT NULL;

-- name: delete_finished_batches
-- Retention: $1 age ms, $2 batch size. A batch whose callback was
-- enqueued longer ago than $1 (batches_finished_idx); its jobs and its
-- callback are jobs, which job retention deletes on their own.
WITH doomed AS (
    SELECT id FROM gaffer.batches
    WHERE state = 'finished' AND finished_at < now() - $1 * interval '1 millisecond'
    ORDER BY finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM gaffer.batches b USING doomed WHERE b.id = doomed.id;
