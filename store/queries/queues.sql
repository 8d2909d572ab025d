-- Queue queries.

-- name: set_queue_paused
-- $1 queue, $2 paused. Nodes hear of it on gaffer_control.
WITH up AS (
    INSERT INTO gaffer.queues (name, paused) VALUES ($1, $2)
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = now()
    RETURNING name, paused
), tell AS (
    SELECT pg_notify('gaffer_control', json_build_object('op', CASE WHEN paused THEN 'pause' ELSE 'resume' END, 'queue', name)::text)
    FROM up
)
SELECT (SELECT count(*) FROM tell) FROM up;

-- name: paused_queues
SELECT name FROM gaffer.queues WHERE paused;

-- name: list_queues
-- Every queue that is known (paused or resumed once) or has unfinished
-- jobs, with its counts.
WITH counts AS (
    SELECT queue,
           count(*) FILTER (WHERE state = 'pending')  AS pending,
           count(*) FILTER (WHERE state = 'retrying') AS retrying,
           count(*) FILTER (WHERE state = 'running')  AS running,
           min(run_at) FILTER (WHERE state <> 'running' AND run_at <= now()) AS oldest_due
    FROM gaffer.jobs
    WHERE state IN ('pending', 'retrying', 'running')
    GROUP BY queue
)
SELECT coalesce(q.name, c.queue), coalesce(q.paused, false),
       coalesce(c.pending, 0), coalesce(c.retrying, 0), coalesce(c.running, 0),
       coalesce(extract(epoch FROM now() - c.oldest_due), 0)::float8
FROM gaffer.queues q
FULL JOIN counts c ON c.queue = q.name
ORDER BY 1;

-- name: delete_queue_jobs
-- Deletes every job of a queue that is not running. Returns how many.
DELETE FROM gaffer.jobs WHERE queue = $1 AND state <> 'running';

-- name: count_queue_jobs
SELECT count(*) FROM gaffer.jobs WHERE queue = $1;
