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

-- name: delete_queue_jobs
-- Deletes every job of a queue that is not running. Returns how many.
DELETE FROM gaffer.jobs WHERE queue = $1 AND state <> 'running';

-- name: vacuum_jobs
-- Vacuums and analyzes the job table: benchmarks run it between rounds so
-- that a round does not pay for the dead rows of the one before.
VACUUM (ANALYZE) gaffer.jobs;

-- name: count_queue_jobs
SELECT count(*) FROM gaffer.jobs WHERE queue = $1;

-- name: sample_throughput
-- Counts the jobs finished since the last sample (at most a minute back),
-- in all (tenant '*') and per tenant, and records them; drops per-tenant
-- samples older than an hour and totals older than a day. Adds the same
-- counts, less workflow timers, per queue and tenant (and per queue in
-- all, tenant '*') to the minute's row of queue_throughput, and drops its
-- tenants' rows older than a day and its totals older than a week.
-- Bounded, as tenants name queues: a sample records each tenant's 20
-- busiest queues and the 500 busiest in all, so a tenant finishing jobs
-- in 10,000 queues adds at most 20 rows of its own and 500 totals a
-- minute (the rest of its queues have no history). Approximate: a job whose
-- transaction began before the window and committed after the count is
-- missed. Run by the leader, in its fenced transaction.
WITH last AS (
    SELECT greatest(coalesce(max(at), now() - interval '10 seconds'), now() - interval '1 minute') AS since
    FROM gaffer.throughput_samples WHERE tenant = '*'
), per_queue AS (
    SELECT j.tenant, j.queue, count(*) FILTER (WHERE j.state = 'completed') AS completed,
           count(*) FILTER (WHERE j.state = 'failed') AS failed,
           -- A queue's history leaves workflow timers (Gaffer's own
           -- gaffer.* jobs) out, as its counts do.
           count(*) FILTER (WHERE j.state = 'completed' AND j.kind NOT LIKE 'gaffer.%') AS work_completed,
           count(*) FILTER (WHERE j.state = 'failed' AND j.kind NOT LIKE 'gaffer.%') AS work_failed
    FROM gaffer.jobs j, last
    WHERE j.state IN ('completed', 'failed', 'cancelled') AND j.finalized_at >= last.since AND j.finalized_at < now()
    GROUP BY j.tenant, j.queue
), finished AS (
    SELECT tenant, sum(completed)::bigint AS completed, sum(failed)::bigint AS failed
    FROM per_queue GROUP BY tenant
), queue_rows AS (
    INSERT INTO gaffer.queue_throughput AS q (queue, tenant, minute, completed, failed)
    SELECT queue, tenant, date_trunc('minute', now()), work_completed, work_failed
    FROM (SELECT *, row_number() OVER (PARTITION BY tenant ORDER BY work_completed + work_failed DESC, queue) AS rank
          FROM per_queue WHERE work_completed + work_failed > 0) busiest
    WHERE rank <= 20
    UNION ALL
    (SELECT queue, '*', date_trunc('minute', now()), sum(work_completed), sum(work_failed) FROM per_queue
     GROUP BY queue HAVING sum(work_completed + work_failed) > 0
     ORDER BY sum(work_completed + work_failed) DESC, queue LIMIT 500)
    ON CONFLICT (queue, tenant, minute) DO UPDATE SET completed = q.completed + excluded.completed, failed = q.failed + excluded.failed
), queue_old AS (
    DELETE FROM gaffer.queue_throughput
    WHERE minute < now() - interval '1 day' AND (tenant <> '*' OR minute < now() - interval '7 days')
), counts AS (
    SELECT '*' AS tenant, coalesce(sum(completed), 0)::bigint AS completed, coalesce(sum(failed), 0)::bigint AS failed FROM finished
    UNION ALL
    SELECT tenant, completed, failed FROM finished WHERE completed + failed > 0
), ins AS (
    INSERT INTO gaffer.throughput_samples (tenant, at, seconds, completed, failed)
    SELECT counts.tenant, now(), extract(epoch FROM now() - last.since), counts.completed, counts.failed FROM counts, last
    ON CONFLICT (tenant, at) DO NOTHING
), old AS (
    DELETE FROM gaffer.throughput_samples
    WHERE at < now() - CASE WHEN tenant = '*' THEN interval '1 day' ELSE interval '1 hour' END
)
SELECT 1;

-- name: throughput_series
-- Jobs finished per second, averaged per minute, over the last $1 ms, of
-- tenant $2 ('*': all). A tenant's minutes without samples had nothing
-- finish; their length comes from the totals' samples.
SELECT date_trunc('minute', t.at) AS minute,
       coalesce(sum(s.completed), 0) / greatest(sum(t.seconds), 1),
       coalesce(sum(s.failed), 0) / greatest(sum(t.seconds), 1)
FROM gaffer.throughput_samples t
LEFT JOIN gaffer.throughput_samples s ON s.at = t.at AND s.tenant = $2
WHERE t.tenant = '*' AND t.at > now() - $1 * interval '1 millisecond'
GROUP BY 1
ORDER BY 1;

-- name: queue_history
-- Jobs of queue $1 finished per bucket of $4 seconds over the last $3 ms,
-- of tenant $2 ('*': all tenants), oldest first; buckets where nothing
-- finished are absent. One range of the primary key: at most a week of
-- minutes, whatever the number of tenants.
SELECT to_timestamp((floor(extract(epoch FROM minute) / $4::bigint) * $4::bigint)::float8) AS bucket,
       sum(completed)::bigint, sum(failed)::bigint
FROM gaffer.queue_throughput
WHERE queue = $1 AND tenant = $2 AND minute >= now() - $3::bigint * interval '1 millisecond'
GROUP BY 1
ORDER BY 1;

-- name: tenant_queue_depths
-- One tenant's queues: those where it has unfinished jobs, with its own
-- counts and its oldest due job's age — nothing of other tenants — and
-- how many live nodes and remote workers (its own or spanning ones) work
-- each: active, not asked to drain, and heard from in the last minute
-- (a node reports every 2 s; one that died while etcd was down stays
-- 'active' until the leader sees it gone). $1 tenant.
SELECT w.queue, w.paused, w.pending, w.retrying, w.running, w.oldest,
       (SELECT count(*) FROM gaffer.nodes nd
        WHERE nd.state = 'active' AND nd.drain_requested_at IS NULL AND nd.last_seen > now() - interval '1 minute'
          AND nd.queues ? w.queue AND (nd.kind = 'node' OR nd.tenant IN ('*', $1)))
FROM (
    SELECT j.queue, coalesce(q.paused, false) AS paused,
           count(*) FILTER (WHERE j.state = 'pending') AS pending,
           count(*) FILTER (WHERE j.state = 'retrying') AS retrying,
           count(*) FILTER (WHERE j.state = 'running') AS running,
           coalesce(extract(epoch FROM now() - min(j.run_at) FILTER (WHERE j.state IN ('pending', 'retrying') AND j.run_at <= now())), 0)::float8 AS oldest
    FROM gaffer.jobs j
    LEFT JOIN gaffer.queues q ON q.name = j.queue
    WHERE j.tenant = $1 AND j.state IN ('pending', 'retrying', 'running') AND j.kind NOT LIKE 'gaffer.%'
    GROUP BY j.queue, q.paused
) w
ORDER BY w.queue;

-- name: queue_depths
-- Every queue that is known (paused or resumed once), has unfinished jobs,
-- or is worked by a live node, with its counts. Built to stay cheap on a
-- huge table: the queues are found by skipping through the claim index
-- (due jobs) and the scheduled index (one probe per queue each), each
-- count is an index scan, and the pending and retrying counts stop at $1
-- (a count at the cap means "at least"; NULL counts them all). Workflow
-- timers waiting (Gaffer's own gaffer.* jobs, counted in their own small
-- index up to the cap) are left out of counts below the cap. Last, how
-- many live nodes and remote workers work each.
WITH RECURSIVE due AS (
    (SELECT queue FROM gaffer.jobs WHERE state IN ('pending', 'retrying') AND due ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM gaffer.jobs j WHERE j.state IN ('pending', 'retrying') AND j.due AND j.queue > w.queue ORDER BY j.queue LIMIT 1)
    FROM due w WHERE w.queue IS NOT NULL
), scheduled AS (
    (SELECT queue FROM gaffer.jobs WHERE state IN ('pending', 'retrying') AND NOT due ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM gaffer.jobs j WHERE j.state IN ('pending', 'retrying') AND NOT j.due AND j.queue > w.queue ORDER BY j.queue LIMIT 1)
    FROM scheduled w WHERE w.queue IS NOT NULL
), names AS (
    SELECT queue AS name FROM due WHERE queue IS NOT NULL
    UNION SELECT queue FROM scheduled WHERE queue IS NOT NULL
    UNION SELECT queue FROM gaffer.jobs WHERE state = 'running'
    UNION SELECT name FROM gaffer.queues
    UNION SELECT jsonb_object_keys(queues) FROM gaffer.nodes WHERE state <> 'dead'
)
SELECT n.name, coalesce(q.paused, false),
       CASE WHEN c.pending < coalesce($1, 9223372036854775807) THEN c.pending - t.pending ELSE c.pending END,
       CASE WHEN c.retrying < coalesce($1, 9223372036854775807) THEN c.retrying - t.retrying ELSE c.retrying END,
       (SELECT count(*) FROM gaffer.jobs j WHERE j.queue = n.name AND j.state = 'running' AND j.kind NOT LIKE 'gaffer.%'),
       -- The oldest due job: one probe of the ready set per unit and
       -- priority (store/schema/ready.sql; its dead rows are few, and a
       -- long read of it would hold its ring still), and one of the
       -- scheduled index (a job whose time has come that no claim has
       -- promoted yet).
       coalesce(extract(epoch FROM now() - least(
           (SELECT min(o.run_at)
            FROM gaffer.claim_units(n.name, '', chr(1114111), '', '', '', 1000) u, generate_series(0, 9) p,
                 LATERAL (SELECT j.run_at FROM gaffer.ready j
                          WHERE j.queue = n.name
                            AND j.tenant COLLATE "C" = u.tenant AND j.fairness_key COLLATE "C" = u.fairness_key
                            AND j.priority = p
                          ORDER BY j.run_at LIMIT 1) o
            WHERE o.run_at <= now()),
           (SELECT j.run_at FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND NOT j.due AND j.queue = n.name AND j.run_at <= now()
            ORDER BY j.run_at LIMIT 1))), 0)::float8,
       (SELECT count(*) FROM gaffer.nodes nd
        WHERE nd.state = 'active' AND nd.drain_requested_at IS NULL AND nd.last_seen > now() - interval '1 minute'
          AND nd.queues ? n.name)
FROM names n
LEFT JOIN gaffer.queues q ON q.name = n.name
-- Index-only scans of the two claim indexes and the retrying one, which
-- carry the state.
CROSS JOIN LATERAL (
    SELECT least((SELECT count(*) FROM (SELECT 1 FROM gaffer.jobs j
                                        WHERE j.state IN ('pending', 'retrying') AND j.due AND j.queue = n.name AND j.state = 'pending' LIMIT $1) c)
                 + (SELECT count(*) FROM (SELECT 1 FROM gaffer.jobs j
                                          WHERE j.state IN ('pending', 'retrying') AND NOT j.due AND j.queue = n.name AND j.state = 'pending' LIMIT $1) c),
                 coalesce($1, 9223372036854775807)) AS pending,
           (SELECT count(*) FROM (SELECT 1 FROM gaffer.jobs j WHERE j.state = 'retrying' AND j.queue = n.name LIMIT $1) c) AS retrying
) c
-- The timers among them: an index-only scan of jobs_timers_idx.
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE x.state = 'pending') AS pending, count(*) FILTER (WHERE x.state = 'retrying') AS retrying
    FROM (SELECT j.state FROM gaffer.jobs j
          WHERE j.state IN ('pending', 'retrying') AND j.kind LIKE 'gaffer.%' AND j.queue = n.name LIMIT $1) x
) t
ORDER BY n.name;

-- name: estimate_jobs
SELECT greatest(reltuples, 0)::float8 FROM pg_class WHERE oid = 'gaffer.jobs'::regclass;
