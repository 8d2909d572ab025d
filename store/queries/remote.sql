-- Remote workers: registration, claims and progress. Their writes for a
-- running attempt (complete, fail, snooze, heartbeat) are the statements
-- in jobs.sql, compare-and-set like a node's.

-- name: register_remote_worker
-- $1 id, $2 name, $3 version, $4 queues, $5 kinds, $6 tenant ('*': all),
-- $7 the most rows a tenant's workers may hold (live, or gone and not yet
-- deleted). Nothing is inserted at the cap.
INSERT INTO gaffer.nodes (id, kind, tenant, hostname, version, queues, kinds, state, in_flight, started_at, last_seen)
SELECT $1, 'remote', $6, $2, $3, $4, $5, 'active', 0, now(), now()
WHERE (SELECT count(*) FROM gaffer.nodes WHERE kind = 'remote' AND tenant = $6) < $7
RETURNING id;

-- name: touch_remote_worker
-- A worker's call: $1 id, $2 the caller's tenant (NULL: a spanning token,
-- which may use any worker). Returns what a claim needs, or nothing for
-- an unknown worker or another tenant's.
UPDATE gaffer.nodes SET last_seen = now()
WHERE id = $1 AND kind = 'remote' AND ($2::text IS NULL OR tenant = $2)
RETURNING tenant, queues, kinds, state, drain_requested_at IS NOT NULL, coalesce(left_reason, '');

-- name: jobs_of_tenant
-- Which of the jobs $1 belong to tenant $2 (NULL: any), with their queue
-- and kind: a remote write names jobs, and a tenant's worker may touch
-- only its own. One primary-key probe per id, whatever the statistics:
-- planned on those of a small table (a fresh backlog not yet analyzed),
-- id = ANY($1) became a sequential scan testing every row against the
-- whole array (2 s for a batch of 1,000 over 100,000 jobs), and a plain
-- join still cost 3,835 ms of PostgreSQL time for 100,000 completions
-- in `gaffer bench remote` (20% of the total); this form, 201 ms. The
-- LIMIT keeps the subquery from being pulled up into a join the planner
-- could hash.
SELECT x.id, j.queue, j.kind
FROM unnest($1::bigint[]) AS x(id)
CROSS JOIN LATERAL (SELECT queue, kind, tenant FROM gaffer.jobs WHERE id = x.id LIMIT 1) j
WHERE $2::text IS NULL OR j.tenant = $2;

-- name: release_node_jobs
-- $1 node or remote worker ids, $2 reason.
SELECT gaffer.release_node_jobs($1::text[], $2::text);

-- name: remote_worker_left
-- A remote worker stopped: $1 id, $2 the caller's tenant (NULL: any).
UPDATE gaffer.nodes
SET state = 'dead', in_flight = 0, left_at = now(), left_reason = 'stopped', last_seen = now()
WHERE id = $1 AND kind = 'remote' AND ($2::text IS NULL OR tenant = $2) AND state <> 'dead'
RETURNING id;

-- name: sweep_remote_workers
-- $1 silent ms, $2 keep ms.
SELECT released, drained, lost, live FROM gaffer.sweep_remote_workers($1, $2);

-- name: set_progress
-- $1 id, $2 attempt, $3 token, $4 percent, $5 message. Compare-and-set on
-- the lease like every write of a running attempt; it touches no indexed
-- column, so it is a HOT update.
UPDATE gaffer.jobs
SET progress = $4, progress_message = $5, progress_attempt = attempt, progress_at = now()
WHERE id = $1 AND attempt = $2 AND lease_token = $3 AND state = 'running'
RETURNING id;
