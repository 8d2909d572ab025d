-- Dead-letter queue queries. Filtered statements are completed in Go:
-- {{where}} becomes the filter's conditions and {{lock}} the row lock.

-- name: replay_dlq
-- Each selected entry makes exactly one new job, linked both ways, in the
-- statement that marks it replayed; a replayed entry is never selected.
-- The new job has the failed job's tags while that job exists (the entry
-- holds no copy of them; retention may have deleted it).
WITH entry AS (
    SELECT * FROM gaffer.dlq
    WHERE replayed_at IS NULL AND {{where}}
    ORDER BY id
    LIMIT {{limit}}
    {{lock}}
), made AS (
    INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, args, replay_of, workflow_run, step, fairness_key, limit_key, tags)
    SELECT tenant, kind, queue, priority, max_attempts, timeout_ms, args, id, workflow_run, step, fairness_key, limit_key,
           (SELECT o.tags FROM gaffer.jobs o WHERE o.id = entry.job_id) FROM entry ORDER BY id
    RETURNING id, replay_of, queue
), marked AS (
    UPDATE gaffer.dlq d SET replayed_at = now(), replay_job_id = made.id
    FROM made WHERE d.id = made.replay_of
), wake AS (
    SELECT pg_notify('gaffer_jobs', q) FROM (SELECT DISTINCT queue AS q FROM made) qs
)
SELECT made.replay_of, made.id, (SELECT count(*) FROM wake) FROM made;

-- name: list_dlq
SELECT id, tenant, job_id, kind, queue, priority, max_attempts, attempts, timeout_ms, args, errors,
       reason, failed_at, replayed_at, replay_job_id, workflow_run, step
FROM gaffer.dlq
WHERE {{where}}
ORDER BY id DESC
LIMIT {{limit}};

-- name: delete_dlq
DELETE FROM gaffer.dlq WHERE {{where}};

-- name: delete_old_dlq
-- Retention: $1 age ms, $2 batch size.
WITH doomed AS (
    SELECT id FROM gaffer.dlq
    WHERE failed_at < now() - $1 * interval '1 millisecond'
    ORDER BY failed_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM gaffer.dlq d USING doomed WHERE d.id = doomed.id;

-- name: count_dlq_capped
-- Unreplayed entries (of tenant $2 when not null), counting no further
-- than $1.
SELECT count(*) FROM (SELECT 1 FROM gaffer.dlq WHERE replayed_at IS NULL AND ($2::text IS NULL OR tenant = $2) LIMIT $1) c;
