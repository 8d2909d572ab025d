-- Back to migration 0015's claim_pick and fair_take, and 0023's
-- fair_take_kinds and claim_pick_remote.
DROP FUNCTION gaffer.fair_take(text, integer, text[], text[], text[], text[], smallint[], timestamptz[], bigint[]);
CREATE FUNCTION gaffer.fair_take(q text, take integer, u_tenant text[], u_fkey text[],
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
        SELECT array_agg(p.id) INTO ids FROM gaffer.fair_take(q, n, u_tenant, u_fkey, c_tenant, c_fkey, c_prio, c_run_at, c_id) p;
        limited := EXISTS (SELECT 1 FROM gaffer.limits l WHERE l.queue IS NULL OR l.queue = q);
    END IF;
    IF limited THEN
        ids := gaffer.limit_admit(q, (SELECT array_agg(j) FROM gaffer.jobs j WHERE j.id = ANY (ids)));
    END IF;
    RETURN ids;
END
$fn$;

DROP FUNCTION gaffer.fair_take_kinds(text, integer, text[], text[], text[], text[], text[], smallint[], timestamptz[], bigint[]);
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
