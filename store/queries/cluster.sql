-- Cluster queries: node rows, drain requests, the leader fence.

-- name: register_node
-- A (re)starting node: active, drain cleared.
INSERT INTO gaffer.nodes (id, hostname, version, tzdata, queues, kinds, state, in_flight, started_at, last_seen)
VALUES ($1, $2, $3, $4, $5, $6, 'active', 0, now(), now())
ON CONFLICT (id) DO UPDATE SET kind = 'node', tenant = NULL, hostname = excluded.hostname, version = excluded.version, tzdata = excluded.tzdata,
    queues = excluded.queues, kinds = excluded.kinds, state = 'active', in_flight = 0, started_at = now(), last_seen = now(),
    drain_requested_at = NULL, drain_deadline = NULL, drained_at = NULL, left_at = NULL, left_reason = NULL;

-- name: touch_node
-- A node's periodic report; returns its drain request, if any, as the
-- time left until the deadline.
UPDATE gaffer.nodes
SET last_seen = now(), in_flight = $2,
    state = CASE WHEN state = 'dead' THEN 'active' ELSE $3 END,
    left_at = NULL, left_reason = NULL
WHERE id = $1
RETURNING drain_requested_at IS NOT NULL,
          coalesce((extract(epoch FROM drain_deadline - now()) * 1000)::bigint, 0);

-- name: node_left
-- $1 id, $2 reason ("drained", "stopped").
UPDATE gaffer.nodes
SET state = 'dead', in_flight = 0, left_at = now(), left_reason = $2, last_seen = now(),
    drained_at = CASE WHEN $2 = 'drained' THEN now() ELSE drained_at END
WHERE id = $1;

-- name: mark_node_lost
-- The leader saw the node's etcd session end. Fenced.
UPDATE gaffer.nodes
SET state = 'dead', left_at = now(), left_reason = 'lost'
WHERE id = $1 AND state <> 'dead'
RETURNING id;

-- name: live_nodes
-- Nodes only: a remote worker has no etcd registration to compare with.
-- With how long ago (database clock) each last registered its row.
SELECT id, extract(epoch FROM now() - started_at)::float8 FROM gaffer.nodes WHERE state <> 'dead' AND kind = 'node';

-- name: request_drain
-- $1 id, $2 deadline ms from now. Unknown and dead nodes answer nothing.
WITH upd AS (
    UPDATE gaffer.nodes
    SET drain_requested_at = coalesce(drain_requested_at, clock_timestamp()),
        drain_deadline = now() + $2 * interval '1 millisecond'
    WHERE id = $1 AND state <> 'dead'
    RETURNING id
), tell AS (
    SELECT pg_notify('gaffer_control', json_build_object('op', 'drain', 'node', id)::text) FROM upd
)
SELECT id, (SELECT count(*) FROM tell) FROM upd;

-- name: cancel_drain
WITH upd AS (
    UPDATE gaffer.nodes
    SET drain_requested_at = NULL, drain_deadline = NULL,
        state = CASE WHEN state = 'draining' THEN 'active' ELSE state END
    WHERE id = $1 AND state <> 'dead'
    RETURNING id
), tell AS (
    SELECT pg_notify('gaffer_control', json_build_object('op', 'undrain', 'node', id)::text) FROM upd
)
SELECT id, (SELECT count(*) FROM tell) FROM upd;

-- name: list_nodes
-- Nodes first, then remote workers. In flight is what a live node last
-- reported; a remote worker's (it reports nothing) and a dead node's are
-- the running attempts it still holds: a lost node's until they are
-- rescued, then none.
SELECT n.id, n.hostname, n.version, n.tzdata, n.queues, n.state,
       CASE WHEN n.kind = 'remote' OR n.state = 'dead'
            THEN (SELECT count(*)::integer FROM gaffer.jobs j WHERE j.state = 'running' AND j.node = n.id)
            ELSE n.in_flight END,
       n.started_at, n.last_seen,
       n.drain_requested_at, n.drain_deadline, n.drained_at, n.left_at, coalesce(n.left_reason, ''),
       extract(epoch FROM now() - n.last_seen)::float8, n.kind, coalesce(n.tenant, ''), n.kinds
FROM gaffer.nodes n
ORDER BY n.kind, n.id;

-- name: raise_fence
-- $1 epoch, $2 leader. Succeeds only for a newer epoch (or the same
-- leader re-raising its own).
UPDATE gaffer.leader_fence
SET epoch = $1, leader = $2, raised_at = now()
WHERE epoch < $1 OR (epoch = $1 AND leader = $2)
RETURNING epoch;

-- name: read_fence
SELECT epoch, coalesce(leader, ''), raised_at FROM gaffer.leader_fence;

-- name: check_fence
-- Inside a leader-only transaction: the share lock makes a concurrent
-- raise wait for this transaction, so a deposed leader's write can never
-- commit after its successor raised the fence.
SELECT epoch FROM gaffer.leader_fence FOR SHARE;

-- name: known_labels
-- The kinds and queues metrics may use as label values: every one of the
-- nodes and of the remote workers registered with a token spanning
-- tenants (tenant '*') that have not left — the operator's — and a
-- bounded few of the tenants' own remote workers' that have not left, as
-- a tenant names those: of each tenant's names (up to 64 characters) its
-- first $1 kinds and $2 queues by name, and of those at most $3 kinds and
-- $4 queues in all, taken round-robin over tenants (every tenant's first,
-- then every second…), so one tenant cannot take them all. Names the
-- operator's know take no slot.
WITH node_kinds AS (
    SELECT DISTINCT k FROM gaffer.nodes, jsonb_array_elements_text(kinds) k
    WHERE state <> 'dead' AND (kind = 'node' OR tenant = '*')
), node_queues AS (
    SELECT DISTINCT q FROM gaffer.nodes, jsonb_object_keys(queues) q
    WHERE state <> 'dead' AND (kind = 'node' OR tenant = '*')
), remote_kinds AS (
    SELECT k FROM (
        SELECT k, row_number() OVER (PARTITION BY tenant ORDER BY k) AS rn
        FROM (SELECT DISTINCT n.tenant, k FROM gaffer.nodes n, jsonb_array_elements_text(n.kinds) k
              WHERE n.state <> 'dead' AND n.kind = 'remote' AND n.tenant <> '*' AND length(k) <= 64 AND k NOT IN (SELECT k FROM node_kinds)) t
    ) r
    WHERE rn <= $1
    GROUP BY k ORDER BY min(rn), k LIMIT $3
), remote_queues AS (
    SELECT q FROM (
        SELECT q, row_number() OVER (PARTITION BY tenant ORDER BY q) AS rn
        FROM (SELECT DISTINCT n.tenant, q FROM gaffer.nodes n, jsonb_object_keys(n.queues) q
              WHERE n.state <> 'dead' AND n.kind = 'remote' AND n.tenant <> '*' AND length(q) <= 64 AND q NOT IN (SELECT q FROM node_queues)) t
    ) r
    WHERE rn <= $2
    GROUP BY q ORDER BY min(rn), q LIMIT $4
)
SELECT coalesce((SELECT array_agg(k) FROM (SELECT k FROM node_kinds UNION ALL SELECT k FROM remote_kinds) x), '{}'),
       coalesce((SELECT array_agg(q) FROM (SELECT q FROM node_queues UNION ALL SELECT q FROM remote_queues) x), '{}');

-- name: kind_registered
-- Whether kind $2 may be enqueued for tenant $1: a node handles it, or a
-- remote worker of the tenant (or one spanning tenants) names it or names
-- no kinds (it works every kind of its queues). Nodes and workers that
-- left still count until dead-node retention deletes their rows, so a
-- redeploy (workers gone for a moment) does not refuse their kinds.
SELECT EXISTS (
    SELECT 1 FROM gaffer.nodes
    WHERE (kind = 'node' AND kinds ? $2)
       OR (kind = 'remote' AND tenant IN ('*', $1) AND (kinds ? $2 OR kinds = '[]'::jsonb))
);

-- name: delete_dead_nodes
-- Retention: $1 age ms, $2 batch size. Nodes that left (or were lost)
-- longer ago than $1. A node that comes back finds its row gone and
-- registers again.
WITH doomed AS (
    SELECT id FROM gaffer.nodes
    WHERE state = 'dead' AND left_at < now() - $1 * interval '1 millisecond'
    ORDER BY left_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM gaffer.nodes n USING doomed WHERE n.id = doomed.id;
