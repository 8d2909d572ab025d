-- The claim: which due jobs a node or a remote worker takes, shared fairly
-- among the fairness units (tenant, fairness_key) of a queue, and admitted
-- through the limits (limit_admit, in limits.sql). The claim statements
-- that call these are in store/queries/jobs.sql and remote.sql.

-- claim_pick picks and locks up to n due jobs of queue q for node node_id
-- to claim, and returns their ids: the claim statement (store's
-- claim_jobs) then marks them running under a new lease. A paused queue,
-- or a draining node, gets nothing.
--
-- Fairness: the units (tenant, fairness_key) with waiting jobs are found
-- by fair_units, each unit gets a share of the n slots by its tenant's
-- weight and gives its first due jobs by (priority, run_at, id) past its
-- cursor (c_*: where the caller's previous claim of that unit ended), and
-- slots a unit leaves unused go to the units that filled their share
-- (fair_take). A queue with one unit (the usual case) takes its jobs in
-- one scan.
--
-- Side claims: k_tenant and k_fkey are the units the caller's last claim
-- served, grace_ms a grace. While one of those units is among the
-- queue's, a unit outside them whose due jobs are all younger than the
-- grace is left out of the claim, for the side claim (claim_pick_units)
-- its insert's notification asks for: a claim of the queue starting
-- between the insert and the side claim would otherwise take the job
-- itself, and the job would wait for that claim to end. A job its side
-- claim misses (no free slot, no LISTEN, a job that came due by its
-- run_at rather than by an insert) waits the grace at most, then is
-- claimed as before.
--
-- Limits: when a limit may apply to the kinds and tenants taken,
-- limit_admit keeps only those whose every limit bucket has room; the
-- others stay pending and due. It is handed the candidates' columns, not
-- their rows read again: a queue with one unit takes them in the scan
-- that locks the rows.
--
-- The work is in PL/pgSQL so that its plans are cached per connection,
-- like a prepared statement's.
CREATE FUNCTION gaffer.claim_pick(q text, n integer, node_id text,
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[],
    after_tenant text, after_fkey text, k_tenant text[], k_fkey text[], grace_ms integer)
RETURNS bigint[]
LANGUAGE plpgsql AS $fn$
DECLARE
    u_tenant text[];
    u_fkey text[];
    ids bigint[];
    kinds text[];
    tenants text[];
    k_kind text[];
    limited boolean;
    cp smallint;
    cr timestamptz;
    ci bigint;
BEGIN
    SELECT fu.u_tenant, fu.u_fkey INTO u_tenant, u_fkey FROM gaffer.fair_units(q, n, node_id, after_tenant, after_fkey) fu;
    IF u_tenant IS NULL THEN
        RETURN NULL;
    END IF;
    -- While a unit the caller's last claim served (k_*) is among those
    -- found, a unit it did not serve whose due jobs are all fresh (due
    -- less than grace_ms ago) is left to the caller's side claim.
    IF grace_ms > 0 AND cardinality(u_tenant) > 1 AND EXISTS (
        SELECT 1 FROM unnest(u_tenant, u_fkey) AS u(t, k) JOIN unnest(k_tenant, k_fkey) AS kn(t, k) ON kn.t = u.t AND kn.k = u.k) THEN
        SELECT array_agg(u.t ORDER BY u.ord), array_agg(u.k ORDER BY u.ord) INTO u_tenant, u_fkey
        FROM unnest(u_tenant, u_fkey) WITH ORDINALITY AS u(t, k, ord)
        -- (CASE: a served unit is never probed, its range beginning with
        -- the dead entries of the claims that served it. A scalar probe
        -- ordered as the claim index is, not EXISTS: the generic plan of
        -- an EXISTS may scan the table instead.)
        WHERE CASE WHEN EXISTS (SELECT 1 FROM unnest(k_tenant, k_fkey) AS kn(t, k) WHERE kn.t = u.t AND kn.k = u.k) THEN true
                   ELSE (SELECT j.id FROM gaffer.jobs j
                         WHERE j.state IN ('pending', 'retrying') AND j.queue = q
                           AND j.tenant COLLATE "C" = u.t AND j.fairness_key COLLATE "C" = u.k
                           AND j.run_at <= now() - grace_ms * interval '1 millisecond'
                         ORDER BY j.priority, j.run_at, j.id LIMIT 1) IS NOT NULL END;
    END IF;
    IF cardinality(u_tenant) = 1 THEN
        SELECT c.prio, c.run_at, c.id INTO cp, cr, ci
        FROM unnest(c_tenant, c_fkey, c_prio, c_run_at, c_id) AS c(tenant, fkey, prio, run_at, id)
        WHERE c.tenant = u_tenant[1] AND c.fkey = u_fkey[1];
        SELECT array_agg(x.id), array_agg(DISTINCT x.kind), array_agg(x.kind)
        INTO ids, kinds, k_kind FROM (
            SELECT j.id, j.kind FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND j.queue = q
              AND j.tenant COLLATE "C" = u_tenant[1] AND j.fairness_key COLLATE "C" = u_fkey[1]
              AND j.run_at <= now()
              AND (j.priority, j.run_at, j.id) > (coalesce(cp, -1::smallint), coalesce(cr, '-infinity'::timestamptz), coalesce(ci, 0::bigint))
            ORDER BY j.priority, j.run_at, j.id
            LIMIT n
            FOR UPDATE SKIP LOCKED) x;
        -- Do the limits apply to these jobs? Decided on the kinds taken,
        -- without a second look at the rows: the default http-per-host
        -- limit costs a queue of other kinds nothing.
        limited := EXISTS (
            SELECT 1 FROM gaffer.limits l
            WHERE (l.queue IS NULL OR l.queue = q) AND (l.tenant IS NULL OR l.tenant = u_tenant[1])
              AND (l.kind IS NULL OR l.kind = ANY (kinds)));
    ELSE
        SELECT array_agg(p.id), array_agg(DISTINCT p.kind), array_agg(DISTINCT p.tenant) INTO ids, kinds, tenants
        FROM gaffer.fair_take(q, n, u_tenant, u_fkey, c_tenant, c_fkey, c_prio, c_run_at, c_id) p;
        limited := EXISTS (
            SELECT 1 FROM gaffer.limits l
            WHERE (l.queue IS NULL OR l.queue = q) AND (l.tenant IS NULL OR l.tenant = ANY (tenants))
              AND (l.kind IS NULL OR l.kind = ANY (kinds)));
    END IF;
    IF limited AND ids IS NOT NULL THEN
        IF cardinality(u_tenant) > 1 THEN
            -- Several units: their tenants and fairness keys, by id.
            ids := (SELECT gaffer.limit_admit(q, array_agg(j.id), array_agg(j.tenant), array_agg(j.kind), array_agg(j.fairness_key))
                    FROM gaffer.jobs j WHERE j.id = ANY (ids));
        ELSE
            ids := gaffer.limit_admit(q, ids, array_fill(u_tenant[1], ARRAY[cardinality(ids)]), k_kind,
                                      array_fill(u_fkey[1], ARRAY[cardinality(ids)]));
        END IF;
    END IF;
    RETURN ids;
END
$fn$;

-- The signature nodes built before side claims' grace (migration 0028)
-- call: no units served, no grace.
CREATE FUNCTION gaffer.claim_pick(q text, n integer, node_id text,
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[],
    after_tenant text, after_fkey text)
RETURNS bigint[]
LANGUAGE sql AS $fn$
    SELECT gaffer.claim_pick(q, n, node_id, c_tenant, c_fkey, c_prio, c_run_at, c_id, after_tenant, after_fkey,
                             NULL::text[], NULL::text[], 0)
$fn$;

-- claim_pick_units is the side claim: a small claim of named fairness
-- units that a node makes while its claim of the queue is in flight, when
-- a job of a unit that claim does not serve is inserted (notified on
-- gaffer_units). The due job of a tenant with nothing else waiting then
-- starts within milliseconds, not after the claim in flight and the next
-- one, however large another tenant's backlog and however long its claims
-- take.
--
-- It picks and locks up to n due jobs of the units (u_tenant[i],
-- u_fkey[i]) of queue q for node node_id, shared among them by weight as
-- a claim of the queue shares its slots (fair_take), each unit's jobs in
-- (priority, run_at, id) order from its start, and keeps only what the
-- limits allow (limit_admit, with the candidates' columns read by id: a
-- side claim takes a few jobs). A paused queue or a draining node gets
-- none.
CREATE FUNCTION gaffer.claim_pick_units(q text, n integer, node_id text, u_tenant text[], u_fkey text[])
RETURNS bigint[]
LANGUAGE plpgsql AS $fn$
DECLARE
    ids bigint[];
    kinds text[];
    tenants text[];
BEGIN
    IF coalesce(cardinality(u_tenant), 0) = 0 OR cardinality(u_tenant) <> coalesce(cardinality(u_fkey), 0)
       OR EXISTS (SELECT 1 FROM gaffer.queues qq WHERE qq.name = q AND qq.paused)
       OR EXISTS (SELECT 1 FROM gaffer.nodes nd WHERE nd.id = node_id AND nd.drain_requested_at IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    SELECT array_agg(p.id), array_agg(DISTINCT p.kind), array_agg(DISTINCT p.tenant) INTO ids, kinds, tenants
    FROM gaffer.fair_take(q, n, u_tenant, u_fkey, '{}', '{}', '{}', '{}', '{}') p;
    IF ids IS NOT NULL AND EXISTS (
        SELECT 1 FROM gaffer.limits l
        WHERE (l.queue IS NULL OR l.queue = q) AND (l.tenant IS NULL OR l.tenant = ANY (tenants))
          AND (l.kind IS NULL OR l.kind = ANY (kinds))) THEN
        ids := (SELECT gaffer.limit_admit(q, array_agg(j.id), array_agg(j.tenant), array_agg(j.kind), array_agg(j.fairness_key))
                FROM gaffer.jobs j WHERE j.id = ANY (ids));
    END IF;
    RETURN ids;
END
$fn$;

-- claim_pick_remote is claim_pick for a remote worker: it picks and locks
-- up to n due jobs of queue q that belong to tenant t (NULL: any tenant,
-- for a spanning worker) and are of the kinds ks (NULL: any kind),
-- sharing the slots fairly among the units and keeping only what the
-- limits allow — through the same limit_admit as every node's claim, so
-- remote and in-process claims count against one limit. A worker that is
-- draining, gone or unknown, or a paused queue, gets nothing. It is a
-- function of its own, without side claims, so that the in-process
-- claim_pick's plans stay the hot path that bench backlog measures.
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
    tenants text[];
    k_kind text[];
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
        SELECT array_agg(x.id), array_agg(DISTINCT x.kind), array_agg(x.kind)
        INTO ids, kinds, k_kind FROM (
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
        SELECT array_agg(p.id), array_agg(DISTINCT p.kind), array_agg(DISTINCT p.tenant) INTO ids, kinds, tenants
        FROM gaffer.fair_take_kinds(q, n, ks, u_tenant, u_fkey, c_tenant, c_fkey, c_prio, c_run_at, c_id) p;
        limited := EXISTS (
            SELECT 1 FROM gaffer.limits l
            WHERE (l.queue IS NULL OR l.queue = q) AND (l.tenant IS NULL OR l.tenant = ANY (tenants))
              AND (l.kind IS NULL OR l.kind = ANY (kinds)));
    END IF;
    IF limited AND ids IS NOT NULL THEN
        IF cardinality(u_tenant) > 1 THEN
            -- Several units: their tenants and fairness keys, by id.
            ids := (SELECT gaffer.limit_admit(q, array_agg(j.id), array_agg(j.tenant), array_agg(j.kind), array_agg(j.fairness_key))
                    FROM gaffer.jobs j WHERE j.id = ANY (ids));
        ELSE
            ids := gaffer.limit_admit(q, ids, array_fill(u_tenant[1], ARRAY[cardinality(ids)]), k_kind,
                                      array_fill(u_fkey[1], ARRAY[cardinality(ids)]));
        END IF;
    END IF;
    RETURN ids;
END
$fn$;

-- queue_units returns up to n units of queue q with waiting jobs (due or
-- not), in descending (tenant, fairness_key) order, skipping through the
-- claim index from its end: there each unit's newest entries are, alive,
-- where its front holds the dead entries earlier claims left.
CREATE FUNCTION gaffer.queue_units(q text, n integer) RETURNS TABLE (tenant text, fairness_key text)
LANGUAGE sql STABLE AS $fn$
    WITH RECURSIVE units AS (
        (SELECT j.tenant, j.fairness_key FROM gaffer.jobs j
         WHERE j.state IN ('pending', 'retrying') AND j.queue = q
         ORDER BY j.tenant COLLATE "C" DESC, j.fairness_key COLLATE "C" DESC LIMIT 1)
        UNION ALL
        SELECT nx.tenant, nx.fairness_key FROM units u CROSS JOIN LATERAL (
            SELECT j.tenant, j.fairness_key FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND j.queue = q
              AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") < (u.tenant, u.fairness_key)
            ORDER BY j.tenant COLLATE "C" DESC, j.fairness_key COLLATE "C" DESC LIMIT 1) nx
    )
    SELECT u.tenant, u.fairness_key FROM units u LIMIT n
$fn$;

-- fair_units returns the units of queue q with waiting jobs (due or not),
-- at most n of them, in descending (tenant, fairness_key) order (see
-- queue_units). With after_tenant set (the caller's previous claim served
-- n units, so there may be more), it starts below that unit and wraps
-- around. None for a paused queue or a draining node (from the first
-- claim whose snapshot sees the order).
CREATE FUNCTION gaffer.fair_units(q text, n integer, node_id text, after_tenant text, after_fkey text,
    OUT u_tenant text[], OUT u_fkey text[])
LANGUAGE plpgsql AS $fn$
BEGIN
    IF EXISTS (SELECT 1 FROM gaffer.queues qq WHERE qq.name = q AND qq.paused)
       OR EXISTS (SELECT 1 FROM gaffer.nodes nd WHERE nd.id = node_id AND nd.drain_requested_at IS NOT NULL) THEN
        RETURN;
    END IF;
    IF after_tenant IS NULL THEN
        SELECT array_agg(x.tenant), array_agg(x.fairness_key) INTO u_tenant, u_fkey FROM gaffer.queue_units(q, n) x;
    ELSE
        WITH RECURSIVE below AS (
            (SELECT j.tenant, j.fairness_key FROM gaffer.jobs j
             WHERE j.state IN ('pending', 'retrying') AND j.queue = q
               AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") < (after_tenant, after_fkey)
             ORDER BY j.tenant COLLATE "C" DESC, j.fairness_key COLLATE "C" DESC LIMIT 1)
            UNION ALL
            SELECT nx.tenant, nx.fairness_key FROM below u CROSS JOIN LATERAL (
                SELECT j.tenant, j.fairness_key FROM gaffer.jobs j
                WHERE j.state IN ('pending', 'retrying') AND j.queue = q
                  AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") < (u.tenant, u.fairness_key)
                ORDER BY j.tenant COLLATE "C" DESC, j.fairness_key COLLATE "C" DESC LIMIT 1) nx
        ), top AS (
            (SELECT j.tenant, j.fairness_key FROM gaffer.jobs j
             WHERE j.state IN ('pending', 'retrying') AND j.queue = q
               AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") >= (after_tenant, after_fkey)
             ORDER BY j.tenant COLLATE "C" DESC, j.fairness_key COLLATE "C" DESC LIMIT 1)
            UNION ALL
            SELECT nx.tenant, nx.fairness_key FROM top u CROSS JOIN LATERAL (
                SELECT j.tenant, j.fairness_key FROM gaffer.jobs j
                WHERE j.state IN ('pending', 'retrying') AND j.queue = q
                  AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") < (u.tenant, u.fairness_key)
                  AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") >= (after_tenant, after_fkey)
                ORDER BY j.tenant COLLATE "C" DESC, j.fairness_key COLLATE "C" DESC LIMIT 1) nx
        ), units AS (
            (SELECT b.tenant, b.fairness_key FROM below b LIMIT n)
            UNION ALL
            (SELECT t.tenant, t.fairness_key FROM top t LIMIT n)
        )
        SELECT array_agg(x.tenant), array_agg(x.fairness_key) INTO u_tenant, u_fkey FROM (SELECT * FROM units LIMIT n) x;
    END IF;
END
$fn$;

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

-- fair_take locks and returns the ids (with their kinds and tenants) of
-- up to take due jobs of the given units of queue q: each unit's share of
-- take by weight (phase 1), then the slots left from the units that filled
-- their share, continuing past the last job each gave (phase 2). Each
-- unit's jobs come by (priority, run_at, id) past its cursor (c_*).
CREATE FUNCTION gaffer.fair_take(q text, take integer, u_tenant text[], u_fkey text[],
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[])
RETURNS TABLE (id bigint, kind text, tenant text)
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
        SELECT x.id, x.kind, x.priority, x.run_at, qt.tenant, qt.fkey, qt.quota
        FROM quotas qt CROSS JOIN LATERAL (
            SELECT j.id, j.kind, j.priority, j.run_at FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND j.queue = q
              AND j.tenant COLLATE "C" = qt.tenant AND j.fairness_key COLLATE "C" = qt.fkey
              AND j.run_at <= now() AND (j.priority, j.run_at, j.id) > (qt.cp, qt.cr, qt.ci)
            ORDER BY j.priority, j.run_at, j.id
            LIMIT qt.quota
            FOR UPDATE SKIP LOCKED) x
    ), room AS (
        SELECT greatest(take - (SELECT count(*) FROM p1), 0)::integer AS r
    ), full_units AS (
        -- A unit that filled its share, and where its share ended.
        SELECT DISTINCT ON (p.tenant, p.fkey) p.tenant, p.fkey, p.priority, p.run_at, p.id
        FROM (SELECT p1.*, count(*) OVER (PARTITION BY p1.tenant, p1.fkey) AS got FROM p1) p
        WHERE p.got = p.quota AND (SELECT r FROM room) > 0
        ORDER BY p.tenant, p.fkey, p.priority DESC, p.run_at DESC, p.id DESC
    ), p2 AS (
        SELECT x.id, x.kind, f.tenant
        FROM full_units f CROSS JOIN room CROSS JOIN LATERAL (
            SELECT j.id, j.kind FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND j.queue = q
              AND j.tenant COLLATE "C" = f.tenant AND j.fairness_key COLLATE "C" = f.fkey
              AND j.run_at <= now() AND (j.priority, j.run_at, j.id) > (f.priority, f.run_at, f.id)
            ORDER BY j.priority, j.run_at, j.id
            LIMIT room.r
            FOR UPDATE SKIP LOCKED) x
    )
    (SELECT p1.id, p1.kind, p1.tenant FROM p1 LIMIT take)
    UNION ALL
    (SELECT p2.id, p2.kind, p2.tenant FROM p2 LIMIT (SELECT r FROM room));
END
$fn$;

-- fair_take_kinds is fair_take for the kinds ks (NULL: any kind).
CREATE FUNCTION gaffer.fair_take_kinds(q text, take integer, ks text[], u_tenant text[], u_fkey text[],
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[])
RETURNS TABLE (id bigint, kind text, tenant text)
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
        SELECT x.id, x.kind, x.priority, x.run_at, qt.tenant, qt.fkey, qt.quota
        FROM quotas qt CROSS JOIN LATERAL (
            SELECT j.id, j.kind, j.priority, j.run_at FROM gaffer.jobs j
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
        -- A unit that filled its share, and where its share ended.
        SELECT DISTINCT ON (p.tenant, p.fkey) p.tenant, p.fkey, p.priority, p.run_at, p.id
        FROM (SELECT p1.*, count(*) OVER (PARTITION BY p1.tenant, p1.fkey) AS got FROM p1) p
        WHERE p.got = p.quota AND (SELECT r FROM room) > 0
        ORDER BY p.tenant, p.fkey, p.priority DESC, p.run_at DESC, p.id DESC
    ), p2 AS (
        SELECT x.id, x.kind, f.tenant
        FROM full_units f CROSS JOIN room CROSS JOIN LATERAL (
            SELECT j.id, j.kind FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND j.queue = q
              AND j.tenant COLLATE "C" = f.tenant AND j.fairness_key COLLATE "C" = f.fkey
              AND j.run_at <= now() AND (j.priority, j.run_at, j.id) > (f.priority, f.run_at, f.id)
              AND (ks IS NULL OR j.kind = ANY (ks))
            ORDER BY j.priority, j.run_at, j.id
            LIMIT room.r
            FOR UPDATE SKIP LOCKED) x
    )
    (SELECT p1.id, p1.kind, p1.tenant FROM p1 LIMIT take)
    UNION ALL
    (SELECT p2.id, p2.kind, p2.tenant FROM p2 LIMIT (SELECT r FROM room));
END
$fn$;
