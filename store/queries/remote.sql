-- Remote workers: registration, claims and progress. Their writes for a
-- running attempt (complete, fail, snooze, heartbeat) are the statements
-- in jobs.sql, compare-and-set like a node's.

-- name: lock_remote_tenant
-- Serialises the registrations of tenant $1 ('*': the spanning workers)
-- until the transaction ends, so that register_remote_worker, run after
-- it in the same transaction, counts every row another registration of
-- the tenant committed: without it, concurrent registrations under READ
-- COMMITTED each counted the rows before the others' and all inserted,
-- past the cap. The two-key form keeps it apart from the one-key locks
-- (limits, migrations); a collision of two tenants' hashes only
-- serialises their registrations.
SELECT pg_advisory_xact_lock(hashtext('gaffer.remote_workers'), hashtext($1));

-- name: register_remote_worker
-- $1 id, $2 name, $3 version, $4 queues, $5 kinds, $6 tenant ('*': all),
-- $7 the most rows a tenant's workers may hold (live, or gone and not yet
-- deleted). Nothing is inserted at the cap. Run after lock_remote_tenant
-- in the same transaction: the count is exact only under that lock.
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

-- name: remote_due_queues
-- Which of the queues $1 hold a job of tenant $2 whose time has come, and
-- are not paused: the one look a node takes for all the remote claims of
-- a tenant waiting on those queues (remote's poller), instead of one
-- claim per waiting claim and queue. Read only; one index probe per queue
-- in jobs_due_idx (queue, tenant), and one in jobs_scheduled_idx (queue,
-- run_at) for a job whose run_at passed that no claim has marked due yet.
-- The tenant is an equality, not "$2 = '*' OR …": a generic plan of that
-- form could not seek to the tenant and would read past every other
-- tenant's due jobs in the queue (remote_due_queues_any is the spanning
-- workers' form).
SELECT q FROM unnest($1::text[]) AS q
WHERE NOT EXISTS (SELECT FROM gaffer.queues qq WHERE qq.name = q AND qq.paused)
  AND (EXISTS (SELECT FROM gaffer.jobs j
               WHERE j.state IN ('pending', 'retrying') AND j.due AND j.queue = q
                 AND j.tenant COLLATE "C" = $2::text AND j.run_at <= now())
       OR EXISTS (SELECT FROM gaffer.jobs s
                  WHERE s.state IN ('pending', 'retrying') AND NOT s.due AND s.queue = q
                    AND s.run_at <= now() AND s.tenant = $2::text));

-- name: remote_due_queues_any
-- remote_due_queues for the spanning workers: a due job of any tenant.
SELECT q FROM unnest($1::text[]) AS q
WHERE NOT EXISTS (SELECT FROM gaffer.queues qq WHERE qq.name = q AND qq.paused)
  AND (EXISTS (SELECT FROM gaffer.jobs j
               WHERE j.state IN ('pending', 'retrying') AND j.due AND j.queue = q AND j.run_at <= now())
       OR EXISTS (SELECT FROM gaffer.jobs s
                  WHERE s.state IN ('pending', 'retrying') AND NOT s.due AND s.queue = q AND s.run_at <= now()));
