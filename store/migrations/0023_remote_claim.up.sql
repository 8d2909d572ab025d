-- gaffer:expand
-- The claim, release and sweep of remote workers (0020_remote_workers).

-- tenant_units returns up to n fairness keys of tenant t's waiting jobs
-- in queue q (due or not), in descending order: queue_units for one
-- tenant. With after_fkey set (the caller's previous claim served n
-- units, so there may be more), it starts below that key and wraps
-- around. Each branch is its own statement, so that each keeps a plan
-- that probes the claim index (queue, tenant, fairness_key, ...).
CREATE FUNCTION gaffer.tenant_units(q text, t text, n integer, after_fkey text) RETURNS text[]
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    keys text[];
BEGIN
    IF after_fkey IS NULL THEN
        WITH RECURSIVE units AS (
            (SELECT j.fairness_key FROM gaffer.jobs j
             WHERE j.state IN ('pending', 'retrying') AND j.queue = q AND j.tenant COLLATE "C" = t
             ORDER BY j.fairness_key COLLATE "C" DESC LIMIT 1)
            UNION ALL
            SELECT nx.fairness_key FROM units u CROSS JOIN LATERAL (
                SELECT j.fairness_key FROM gaffer.jobs j
                WHERE j.state IN ('pending', 'retrying') AND j.queue = q AND j.tenant COLLATE "C" = t
                  AND j.fairness_key COLLATE "C" < u.fairness_key
                ORDER BY j.fairness_key COLLATE "C" DESC LIMIT 1) nx
        )
        SELECT array_agg(x.fairness_key) INTO keys FROM (SELECT u.fairness_key FROM units u LIMIT n) x;
        RETURN keys;
    END IF;
    WITH RECURSIVE below AS (
        (SELECT j.fairness_key FROM gaffer.jobs j
         WHERE j.state IN ('pending', 'retrying') AND j.queue = q AND j.tenant COLLATE "C" = t
           AND j.fairness_key COLLATE "C" < after_fkey
         ORDER BY j.fairness_key COLLATE "C" DESC LIMIT 1)
        UNION ALL
        SELECT nx.fairness_key FROM below u CROSS JOIN LATERAL (
            SELECT j.fairness_key FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND j.queue = q AND j.tenant COLLATE "C" = t
              AND j.fairness_key COLLATE "C" < u.fairness_key
            ORDER BY j.fairness_key COLLATE "C" DESC LIMIT 1) nx
    ), top AS (
        (SELECT j.fairness_key FROM gaffer.jobs j
         WHERE j.state IN ('pending', 'retrying') AND j.queue = q AND j.tenant COLLATE "C" = t
           AND j.fairness_key COLLATE "C" >= after_fkey
         ORDER BY j.fairness_key COLLATE "C" DESC LIMIT 1)
        UNION ALL
        SELECT nx.fairness_key FROM top u CROSS JOIN LATERAL (
            SELECT j.fairness_key FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND j.queue = q AND j.tenant COLLATE "C" = t
              AND j.fairness_key COLLATE "C" < u.fairness_key AND j.fairness_key COLLATE "C" >= after_fkey
            ORDER BY j.fairness_key COLLATE "C" DESC LIMIT 1) nx
    ), units AS (
        (SELECT b.fairness_key FROM below b LIMIT n)
        UNION ALL
        (SELECT tp.fairness_key FROM top tp LIMIT n)
    )
    SELECT array_agg(x.fairness_key) INTO keys FROM (SELECT * FROM units LIMIT n) x;
    RETURN keys;
END
$fn$;

-- fair_take_kinds is fair_take (migration 0015) that takes only jobs of
-- the kinds ks (NULL: any kind).
CREATE FUNCTION gaffer.fair_take_kinds(q text, take integer, ks text[], u_tenant text[], u_fkey text[],
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[])
RETURNS TABLE (id bigint)
LANGUAGE plpgsql AS $fn$
BEGIN
    RETURN QUERY
    WITH quotas AS (
        SELECT u.tenant, u.fkey,
               greatest(1, ceil(take * coalesce(tw.weight, 1)::double precision
                                / sum(coalesce(tw.weight, 1)) OVER ()))::integer AS quota,
               coalesce(c.prio, -1::smallint) AS cp, coalesce(c.run_at, '-infinity'::timestamptz) AS cr, coalesce(c.id, 0::bigint) AS ci
        FROM unnest(u_tenant, u_fkey) AS u(tenant, fkey)
        LEFT JOIN gaffer.tenant_weights tw ON tw.tenant = u.tenant
        LEFT JOIN unnest(c_tenant, c_fkey, c_prio, c_run_at, c_id) AS c(tenant, fkey, prio, run_at, id)
            ON c.tenant = u.tenant AND c.fkey = u.fkey
    ), p1 AS (
        SELECT x.id, qt.tenant, qt.fkey, qt.quota
        FROM quotas qt CROSS JOIN LATERAL (
            SELECT j.id FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND j.queue = q
              AND j.tenant COLLATE "C" = qt.tenant AND j.fairness_key COLLATE "C" = qt.fkey
              AND j.run_at <= now() AND (j.priority, j.run_at, j.id) > (qt.cp, qt.cr, qt.ci)
              AND (ks IS NULL OR j.kind = ANY (ks))
            ORDER BY j.priority, j.run_at, j.id
            LIMIT qt.quota
            FOR UPDATE SKIP LOCKED) x
    ), room AS (
        SELECT greatest(take - (SELECT count(*) FROM p1), 0)::integer AS r
    ), full_units AS (
        SELECT p.tenant, p.fkey, array_agg(p.id) AS ids
        FROM p1 p GROUP BY p.tenant, p.fkey, p.quota HAVING count(*) = p.quota AND (SELECT r FROM room) > 0
    ), p2 AS (
        SELECT x.id
        FROM full_units f JOIN quotas qt ON qt.tenant = f.tenant AND qt.fkey = f.fkey
        CROSS JOIN room CROSS JOIN LATERAL (
            SELECT j.id FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND j.queue = q
              AND j.tenant COLLATE "C" = f.tenant AND j.fairness_key COLLATE "C" = f.fkey
              AND j.run_at <= now() AND (j.priority, j.run_at, j.id) > (qt.cp, qt.cr, qt.ci)
              AND (ks IS NULL OR j.kind = ANY (ks))
              AND j.id <> ALL (f.ids)
            ORDER BY j.priority, j.run_at, j.id
            LIMIT room.r
            FOR UPDATE SKIP LOCKED) x
    )
    (SELECT p1.id FROM p1 LIMIT take)
    UNION ALL
    (SELECT p2.id FROM p2 LIMIT (SELECT r FROM room));
END
$fn$;

-- claim_pick_remote is claim_pick (migration 0015) for a remote worker:
-- it picks and locks up to n due jobs of queue q that belong to tenant t
-- (NULL: any tenant, for a spanning worker) and are of the kinds ks
-- (NULL: any kind), sharing the slots fairly among the units and keeping
-- only what the limits allow — through the same limit_admit as every
-- node's claim, so remote and in-process claims count against one limit.
-- A worker that is draining, gone or unknown, or a paused queue, gets
-- nothing. The in-process claim_pick is left as it was: its plans are
-- the hot path that bench backlog measures.
CREATE FUNCTION gaffer.claim_pick_remote(q text, n integer, worker_id text, t text, ks text[],
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[],
    after_tenant text, after_fkey text)
RETURNS bigint[]
LANGUAGE plpgsql AS $fn$
DECLARE
    u_tenant text[];
    u_fkey text[];
    ids bigint[];
    kinds text[];
    limited boolean;
    cp smallint;
    cr timestamptz;
    ci bigint;
BEGIN
    PERFORM 1 FROM gaffer.nodes nd
    WHERE nd.id = worker_id AND nd.kind = 'remote' AND nd.state <> 'dead' AND nd.drain_requested_at IS NULL;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF t IS NULL THEN
        -- Every tenant's units: fair_units also checks the pause.
        SELECT fu.u_tenant, fu.u_fkey INTO u_tenant, u_fkey FROM gaffer.fair_units(q, n, worker_id, after_tenant, after_fkey) fu;
    ELSIF NOT EXISTS (SELECT 1 FROM gaffer.queues qq WHERE qq.name = q AND qq.paused) THEN
        u_fkey := gaffer.tenant_units(q, t, n, CASE WHEN after_tenant = t THEN after_fkey END);
        IF u_fkey IS NOT NULL THEN
            u_tenant := array_fill(t, ARRAY[cardinality(u_fkey)]);
        END IF;
    END IF;
    IF u_tenant IS NULL THEN
        RETURN NULL;
    END IF;
    IF cardinality(u_tenant) = 1 THEN
        SELECT c.prio, c.run_at, c.id INTO cp, cr, ci
        FROM unnest(c_tenant, c_fkey, c_prio, c_run_at, c_id) AS c(tenant, fkey, prio, run_at, id)
        WHERE c.tenant = u_tenant[1] AND c.fkey = u_fkey[1];
        SELECT array_agg(x.id), array_agg(DISTINCT x.kind) INTO ids, kinds FROM (
            SELECT j.id, j.kind FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND j.queue = q
              AND j.tenant COLLATE "C" = u_tenant[1] AND j.fairness_key COLLATE "C" = u_fkey[1]
              AND j.run_at <= now()
              AND (j.priority, j.run_at, j.id) > (coalesce(cp, -1::smallint), coalesce(cr, '-infinity'::timestamptz), coalesce(ci, 0::bigint))
              AND (ks IS NULL OR j.kind = ANY (ks))
            ORDER BY j.priority, j.run_at, j.id
            LIMIT n
            FOR UPDATE SKIP LOCKED) x;
        limited := EXISTS (
            SELECT 1 FROM gaffer.limits l
            WHERE (l.queue IS NULL OR l.queue = q) AND (l.tenant IS NULL OR l.tenant = u_tenant[1])
              AND (l.kind IS NULL OR l.kind = ANY (kinds)));
    ELSE
        SELECT array_agg(p.id) INTO ids
        FROM gaffer.fair_take_kinds(q, n, ks, u_tenant, u_fkey, c_tenant, c_fkey, c_prio, c_run_at, c_id) p;
        limited := EXISTS (SELECT 1 FROM gaffer.limits l WHERE l.queue IS NULL OR l.queue = q);
    END IF;
    IF limited THEN
        ids := gaffer.limit_admit(q, (SELECT array_agg(j) FROM gaffer.jobs j WHERE j.id = ANY (ids)));
    END IF;
    RETURN ids;
END
$fn$;

-- release_node_jobs gives back every attempt running on the given nodes
-- or remote workers without using it up (the job is claimable again at
-- once; a job whose cancellation was asked for ends cancelled), wakes
-- the queues' workers, and returns how many it released.
CREATE FUNCTION gaffer.release_node_jobs(node_ids text[], reason text) RETURNS integer
LANGUAGE sql AS $fn$
    WITH upd AS (
        UPDATE gaffer.jobs j
        SET state = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'pending' END,
            finalized_at = CASE WHEN j.cancel_requested THEN now() END,
            run_at = now(), max_attempts = j.max_attempts + 1, lease_expires_at = NULL,
            errors = gaffer.append_attempt_error(j.errors, jsonb_build_object(
                'attempt', j.attempt, 'at', now(), 'error', reason, 'kind', 'released', 'node', j.node))
        WHERE j.state = 'running' AND j.node = ANY (node_ids)
        RETURNING j.queue, j.state
    ), wake AS (
        SELECT pg_notify('gaffer_jobs', qs.q) FROM (SELECT DISTINCT u.queue AS q FROM upd u WHERE u.state = 'pending') qs
    )
    SELECT ((SELECT count(*) FROM upd) + 0 * (SELECT count(*) FROM wake))::integer
$fn$;

-- sweep_remote_workers moves remote workers along, by the database clock:
-- a drain order makes one draining; at its drain deadline its running
-- attempts are released; once it runs nothing while draining it has
-- drained and left; one not heard from for silent_ms is lost (its leases
-- expire and the lease rescuer runs its jobs again); a worker gone for
-- keep_ms is deleted. Every node runs it; the statements are idempotent
-- and row locks order concurrent sweeps. It returns what it did and how
-- many remote workers are live.
CREATE FUNCTION gaffer.sweep_remote_workers(silent_ms bigint, keep_ms bigint,
    OUT released integer, OUT drained integer, OUT lost integer, OUT live integer)
LANGUAGE plpgsql AS $fn$
DECLARE
    due text[];
BEGIN
    UPDATE gaffer.nodes SET state = 'draining'
    WHERE kind = 'remote' AND state = 'active' AND drain_requested_at IS NOT NULL;

    SELECT array_agg(nd.id) INTO due FROM gaffer.nodes nd
    WHERE nd.kind = 'remote' AND nd.state <> 'dead' AND nd.drain_deadline <= now();
    released := 0;
    IF due IS NOT NULL THEN
        released := gaffer.release_node_jobs(due, 'released: the remote worker was drained and its deadline passed');
    END IF;

    WITH upd AS (
        UPDATE gaffer.nodes nd
        SET state = 'dead', in_flight = 0, left_at = now(), left_reason = 'drained', drained_at = now()
        WHERE nd.kind = 'remote' AND nd.state <> 'dead' AND nd.drain_requested_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM gaffer.jobs j WHERE j.state = 'running' AND j.node = nd.id)
        RETURNING 1
    )
    SELECT count(*) INTO drained FROM upd;

    WITH upd AS (
        UPDATE gaffer.nodes nd
        SET state = 'dead', left_at = now(), left_reason = 'lost'
        WHERE nd.kind = 'remote' AND nd.state <> 'dead' AND nd.last_seen < now() - silent_ms * interval '1 millisecond'
        RETURNING 1
    )
    SELECT count(*) INTO lost FROM upd;

    DELETE FROM gaffer.nodes nd
    WHERE nd.kind = 'remote' AND nd.state = 'dead' AND nd.left_at < now() - keep_ms * interval '1 millisecond';

    SELECT count(*) INTO live FROM gaffer.nodes nd WHERE nd.kind = 'remote' AND nd.state <> 'dead';
END
$fn$;
