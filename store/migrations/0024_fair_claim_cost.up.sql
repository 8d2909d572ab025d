-- gaffer:expand
-- The claim of a queue with several fairness units, cheaper (migration
-- 0015 made it): each unit that filled its share continues from where its
-- share ended instead of scanning it again past its own locked rows, and
-- limit_admit runs only when a limit may apply to the kinds and tenants
-- taken, as it already did for a queue with one unit (before, the default
-- http-per-host limit made every such claim weigh each candidate against
-- every limit). The remote workers' copies (migration 0023:
-- fair_take_kinds, claim_pick_remote) get the same two changes. Same
-- arguments and result: nodes of the build before it keep working.
DROP FUNCTION gaffer.fair_take(text, integer, text[], text[], text[], text[], smallint[], timestamptz[], bigint[]);
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

CREATE OR REPLACE FUNCTION gaffer.claim_pick(q text, n integer, node_id text,
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
    limited boolean;
    cp smallint;
    cr timestamptz;
    ci bigint;
BEGIN
    SELECT fu.u_tenant, fu.u_fkey INTO u_tenant, u_fkey FROM gaffer.fair_units(q, n, node_id, after_tenant, after_fkey) fu;
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
    IF limited THEN
        ids := gaffer.limit_admit(q, (SELECT array_agg(j) FROM gaffer.jobs j WHERE j.id = ANY (ids)));
    END IF;
    RETURN ids;
END
$fn$;

-- fair_take_kinds: fair_take for the kinds ks (NULL: any), as above.
DROP FUNCTION gaffer.fair_take_kinds(text, integer, text[], text[], text[], text[], text[], smallint[], timestamptz[], bigint[]);
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

CREATE OR REPLACE FUNCTION gaffer.claim_pick_remote(q text, n integer, worker_id text, t text, ks text[],
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
        SELECT array_agg(p.id), array_agg(DISTINCT p.kind), array_agg(DISTINCT p.tenant) INTO ids, kinds, tenants
        FROM gaffer.fair_take_kinds(q, n, ks, u_tenant, u_fkey, c_tenant, c_fkey, c_prio, c_run_at, c_id) p;
        limited := EXISTS (
            SELECT 1 FROM gaffer.limits l
            WHERE (l.queue IS NULL OR l.queue = q) AND (l.tenant IS NULL OR l.tenant = ANY (tenants))
              AND (l.kind IS NULL OR l.kind = ANY (kinds)));
    END IF;
    IF limited THEN
        ids := gaffer.limit_admit(q, (SELECT array_agg(j) FROM gaffer.jobs j WHERE j.id = ANY (ids)));
    END IF;
    RETURN ids;
END
$fn$;
