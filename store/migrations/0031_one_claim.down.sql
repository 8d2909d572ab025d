-- gaffer:generated
-- Back to the routines 0030_due_jobs left, written by migrategen with
-- 0031_one_claim.up.sql.
SET LOCAL check_function_bodies = off;

DROP TRIGGER limit_buckets_serialized ON gaffer.limit_buckets;
DROP TRIGGER limits_serialized ON gaffer.limits;
DROP FUNCTION gaffer.claim(text, integer, text, boolean, text, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer);
DROP FUNCTION gaffer.claim_promote(text);
DROP FUNCTION gaffer.claim_take(text, integer, text[], text[], text[], integer[], text[], text[], smallint[], timestamp with time zone[], bigint[]);
DROP FUNCTION gaffer.claim_unit(text, text, text, text[], smallint, timestamp with time zone, bigint, integer);
DROP FUNCTION gaffer.claim_units(text, text, text, text, text, text, integer);
DROP FUNCTION gaffer.limit_admit(text, bigint[], text[], text[], text[], integer, text[], text[], integer[]);
DROP FUNCTION gaffer.limit_bucket_key(text);
DROP FUNCTION gaffer.limits_changing();
DROP FUNCTION gaffer.limits_hold();
DROP FUNCTION gaffer.limits_lock_id();
DROP FUNCTION gaffer.url_host(text);

-- gaffer.claim_pick(text, integer, text, text[], text[], smallint[], timestamp with time zone[], bigint[], text, text) as 0028_side_claim_grace left it
CREATE OR REPLACE FUNCTION gaffer.claim_pick(q text, n integer, node_id text, c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], after_tenant text, after_fkey text)
 RETURNS bigint[]
 LANGUAGE sql
AS $function$
    SELECT gaffer.claim_pick(q, n, node_id, c_tenant, c_fkey, c_prio, c_run_at, c_id, after_tenant, after_fkey,
                             NULL::text[], NULL::text[], 0)
$function$;

-- gaffer.claim_pick(text, integer, text, text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer) as 0029_limit_admit_cost left it
CREATE OR REPLACE FUNCTION gaffer.claim_pick(q text, n integer, node_id text, c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], after_tenant text, after_fkey text, k_tenant text[], k_fkey text[], grace_ms integer)
 RETURNS bigint[]
 LANGUAGE plpgsql
AS $function$
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
$function$;

-- gaffer.claim_pick_remote(text, integer, text, text, text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text) as 0029_limit_admit_cost left it
CREATE OR REPLACE FUNCTION gaffer.claim_pick_remote(q text, n integer, worker_id text, t text, ks text[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], after_tenant text, after_fkey text)
 RETURNS bigint[]
 LANGUAGE plpgsql
AS $function$
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
$function$;

-- gaffer.claim_pick_units(text, integer, text, text[], text[]) as 0029_limit_admit_cost left it
CREATE OR REPLACE FUNCTION gaffer.claim_pick_units(q text, n integer, node_id text, u_tenant text[], u_fkey text[])
 RETURNS bigint[]
 LANGUAGE plpgsql
AS $function$
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
$function$;

-- gaffer.fair_take(text, integer, text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[]) as 0024_fair_claim_cost left it
CREATE OR REPLACE FUNCTION gaffer.fair_take(q text, take integer, u_tenant text[], u_fkey text[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[])
 RETURNS TABLE(id bigint, kind text, tenant text)
 LANGUAGE plpgsql
AS $function$
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
$function$;

-- gaffer.fair_take_kinds(text, integer, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[]) as 0024_fair_claim_cost left it
CREATE OR REPLACE FUNCTION gaffer.fair_take_kinds(q text, take integer, ks text[], u_tenant text[], u_fkey text[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[])
 RETURNS TABLE(id bigint, kind text, tenant text)
 LANGUAGE plpgsql
AS $function$
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
$function$;

-- gaffer.fair_units(text, integer, text, text, text) as 0015_fair_limits left it
CREATE OR REPLACE FUNCTION gaffer.fair_units(q text, n integer, node_id text, after_tenant text, after_fkey text, OUT u_tenant text[], OUT u_fkey text[])
 RETURNS record
 LANGUAGE plpgsql
AS $function$
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
$function$;

-- gaffer.limit_admit(text, bigint[], text[], text[], text[]) as 0029_limit_admit_cost left it
CREATE OR REPLACE FUNCTION gaffer.limit_admit(q text, c_id bigint[], c_tenant text[], c_kind text[], c_fkey text[])
 RETURNS bigint[]
 LANGUAGE plpgsql
AS $function$
DECLARE
    read_key boolean;
    read_args boolean;
    c_lkey text[];
    c_args json[];
    c_prio smallint[];
    c_run_at timestamptz[];
    b_name text[];
    b_key text[];
    b_want integer[];
    b_free double precision[];
    b_tokens double precision[];
    b_running integer[];
    b_trust boolean[];
    b_fence xid8[];
    b_got integer[];
    admitted bigint[];
BEGIN
    IF c_id IS NULL THEN
        RETURN NULL;
    END IF;
    -- The limit keys and args, only when a limit that applies is keyed
    -- by them (they lie at the end of the row).
    SELECT coalesce(bool_or(l.key_from = 'limit_key'), false),
           coalesce(bool_or(l.key_from LIKE 'args.%' OR l.key_from LIKE 'host(args.%'), false)
    INTO read_key, read_args
    FROM gaffer.limits l
    WHERE (l.queue IS NULL OR l.queue = q) AND (l.kind IS NULL OR l.kind = ANY (c_kind))
      AND (l.tenant IS NULL OR l.tenant = ANY (c_tenant));
    IF read_key OR read_args THEN
        SELECT array_agg(j.limit_key ORDER BY c.ord), array_agg(CASE WHEN read_args THEN j.args END ORDER BY c.ord)
        INTO c_lkey, c_args
        FROM unnest(c_id) WITH ORDINALITY AS c(id, ord) LEFT JOIN gaffer.jobs j ON j.id = c.id;
    END IF;
    -- The buckets the candidates fall in, and how many want each: the
    -- candidates alike in what limits read first, then the limits.
    SELECT array_agg(x.name ORDER BY x.name, x.key), array_agg(x.key ORDER BY x.name, x.key), array_agg(x.n ORDER BY x.name, x.key)
    INTO b_name, b_key, b_want
    FROM (
        SELECT l.name, gaffer.limit_key_of(l.key_from, c.tenant, c.kind, q, c.lkey, c.fkey, c.args::json) AS key,
               sum(c.n)::integer AS n
        FROM (SELECT u.tenant, u.kind, u.fkey, c_lkey[u.ord] AS lkey, c_args[u.ord]::text AS args, count(*) AS n
              FROM unnest(c_tenant, c_kind, c_fkey) WITH ORDINALITY AS u(tenant, kind, fkey, ord)
              GROUP BY 1, 2, 3, 4, 5) c
        JOIN gaffer.limits l ON (l.queue IS NULL OR l.queue = q) AND (l.kind IS NULL OR l.kind = c.kind)
                            AND (l.tenant IS NULL OR l.tenant = c.tenant)
        GROUP BY 1, 2
    ) x;
    IF b_name IS NULL THEN
        RETURN c_id;
    END IF;
    -- Created if new, then locked, in one order.
    INSERT INTO gaffer.limit_buckets (limit_name, key, tokens, refilled_at)
    SELECT b.name, b.key, coalesce(l.burst, 0), now()
    FROM unnest(b_name, b_key) AS b(name, key) JOIN gaffer.limits l ON l.name = b.name
    ON CONFLICT (limit_name, key) DO NOTHING;
    PERFORM 1 FROM gaffer.limit_buckets lb
    WHERE (lb.limit_name, lb.key) IN (SELECT b.name, b.key FROM unnest(b_name, b_key) AS b(name, key))
    ORDER BY lb.limit_name, lb.key
    FOR UPDATE OF lb;

    -- A new statement: its snapshot sees every claim committed before the
    -- locks were granted. Per bucket: the running attempts it counts (its
    -- bound when the wanted fit under it, else counted), whether that
    -- figure may become its bound, its fence, its whole tokens refilled,
    -- and its free slots.
    SELECT array_agg(f.running ORDER BY f.ord), array_agg(f.trust ORDER BY f.ord), array_agg(f.fence ORDER BY f.ord),
           array_agg(f.tokens ORDER BY f.ord),
           array_agg(least(CASE WHEN f.concurrency IS NULL THEN 2147483647 ELSE f.concurrency - f.running END,
                           CASE WHEN f.tokens IS NULL THEN 2147483647 ELSE floor(f.tokens) END) ORDER BY f.ord)
    INTO b_running, b_trust, b_fence, b_tokens, b_free
    FROM (
        SELECT b.ord, l.concurrency, t.tokens, fc.fence,
               CASE WHEN l.concurrency IS NULL THEN NULL
                    WHEN lb.running_bound IS NOT NULL AND lb.running_bound + b.want <= l.concurrency THEN lb.running_bound
                    ELSE (SELECT count(*) FROM gaffer.jobs r
                          WHERE r.state = 'running' AND (l.queue IS NULL OR r.queue = l.queue)
                            AND (l.kind IS NULL OR r.kind = l.kind) AND (l.tenant IS NULL OR r.tenant = l.tenant)
                            AND gaffer.limit_key_of(l.key_from, r.tenant, r.kind, r.queue, r.limit_key, r.fairness_key, r.args) = b.key)::integer
               END AS running,
               l.concurrency IS NOT NULL AND (
                   (lb.running_bound IS NOT NULL AND lb.running_bound + b.want <= l.concurrency)
                   OR (pg_snapshot_xmin(pg_current_snapshot()) >= fc.fence AND pg_current_xact_id() >= fc.fence)) AS trust
        FROM unnest(b_name, b_key, b_want) WITH ORDINALITY AS b(name, key, want, ord)
        JOIN gaffer.limits l ON l.name = b.name
        JOIN gaffer.limit_buckets lb ON lb.limit_name = b.name AND lb.key = b.key
        CROSS JOIN LATERAL (SELECT coalesce(lb.bound_fence, pg_snapshot_xmax(pg_current_snapshot())) AS fence) fc
        CROSS JOIN LATERAL (SELECT CASE WHEN l.rate IS NULL THEN NULL
                                       ELSE least(l.burst::double precision, lb.tokens
                                            + extract(epoch FROM now() - lb.refilled_at) * 1000 / l.period_ms * l.rate) END AS tokens) t
    ) f;

    IF NOT EXISTS (SELECT 1 FROM unnest(b_want, b_free) AS w(want, free) WHERE w.want > w.free) THEN
        admitted := c_id;
        b_got := b_want;
    ELSE
        -- Some bucket has fewer slots than candidates: take each bucket's
        -- in fair order; a candidate refused by any of its buckets waits.
        SELECT array_agg(j.priority ORDER BY c.ord), array_agg(j.run_at ORDER BY c.ord)
        INTO c_prio, c_run_at
        FROM unnest(c_id) WITH ORDINALITY AS c(id, ord) LEFT JOIN gaffer.jobs j ON j.id = c.id;
        WITH pairs AS (
            SELECT c.id, l.name, gaffer.limit_key_of(l.key_from, c.tenant, c.kind, q, c_lkey[c.ord], c.fkey, c_args[c.ord]) AS key,
                   row_number() OVER (PARTITION BY c.tenant, c.fkey ORDER BY c_prio[c.ord], c_run_at[c.ord], c.id)
                       / coalesce(tw.weight, 1)::double precision AS rank
            FROM unnest(c_id, c_tenant, c_kind, c_fkey) WITH ORDINALITY AS c(id, tenant, kind, fkey, ord)
            JOIN gaffer.limits l ON (l.queue IS NULL OR l.queue = q) AND (l.kind IS NULL OR l.kind = c.kind)
                                AND (l.tenant IS NULL OR l.tenant = c.tenant)
            LEFT JOIN gaffer.tenant_weights tw ON tw.tenant = c.tenant
        ), ranked AS (
            SELECT p.id, p.name, p.key, row_number() OVER (PARTITION BY p.name, p.key ORDER BY p.rank, p.id) AS pos
            FROM pairs p
        ), refused AS (
            SELECT DISTINCT rk.id
            FROM ranked rk JOIN unnest(b_name, b_key, b_free) AS b(name, key, free) ON b.name = rk.name AND b.key = rk.key
            WHERE rk.pos > b.free
        )
        SELECT (SELECT array_agg(c.id) FROM unnest(c_id) AS c(id) WHERE c.id NOT IN (SELECT rf.id FROM refused rf)),
               (SELECT array_agg(coalesce(g.n, 0)::integer ORDER BY b.ord)
                FROM unnest(b_name, b_key) WITH ORDINALITY AS b(name, key, ord)
                LEFT JOIN (SELECT rk.name, rk.key, count(*) AS n FROM ranked rk
                           WHERE rk.id NOT IN (SELECT rf.id FROM refused rf) GROUP BY rk.name, rk.key) g
                    ON g.name = b.name AND g.key = b.key)
        INTO admitted, b_got;
    END IF;

    -- Bounds rise by the admitted (or are unset), rate buckets spend a
    -- token per admitted start.
    UPDATE gaffer.limit_buckets lb
    SET running_bound = CASE WHEN b.trust THEN b.running + b.got END,
        bound_fence = b.fence,
        tokens = CASE WHEN b.tokens IS NULL THEN lb.tokens ELSE b.tokens - b.got END,
        refilled_at = CASE WHEN b.tokens IS NULL THEN lb.refilled_at ELSE now() END
    FROM unnest(b_name, b_key, b_running, b_trust, b_fence, b_tokens, b_got) AS b(name, key, running, trust, fence, tokens, got)
    WHERE lb.limit_name = b.name AND lb.key = b.key;
    RETURN admitted;
END
$function$;

-- gaffer.limit_admit(text, gaffer.jobs[]) as 0029_limit_admit_cost left it
CREATE OR REPLACE FUNCTION gaffer.limit_admit(q text, cands gaffer.jobs[])
 RETURNS bigint[]
 LANGUAGE sql
AS $function$
    SELECT gaffer.limit_admit(q, array_agg(c.id), array_agg(c.tenant), array_agg(c.kind), array_agg(c.fairness_key))
    FROM unnest(cands) c
$function$;

-- gaffer.limit_changed() as 0029_limit_admit_cost left it
CREATE OR REPLACE FUNCTION gaffer.limit_changed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    UPDATE gaffer.limit_buckets SET running_bound = NULL, bound_fence = NULL
    WHERE limit_name = OLD.name AND (running_bound IS NOT NULL OR bound_fence IS NOT NULL);
    RETURN NULL;
END
$function$;

-- gaffer.limit_key(text, gaffer.jobs) as 0015_fair_limits left it
CREATE OR REPLACE FUNCTION gaffer.limit_key(key_from text, j gaffer.jobs)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT coalesce(CASE
        WHEN key_from = '' THEN ''
        WHEN key_from = 'tenant' THEN j.tenant
        WHEN key_from = 'kind' THEN j.kind
        WHEN key_from = 'queue' THEN j.queue
        WHEN key_from = 'limit_key' THEN j.limit_key
        WHEN key_from = 'fairness_key' THEN j.fairness_key
        WHEN key_from LIKE 'args.%' THEN j.args #>> string_to_array(substr(key_from, 6), '.')
        WHEN key_from LIKE 'host(args.%)' THEN lower(substring(
            j.args #>> string_to_array(substr(key_from, 11, length(key_from) - 11), '.')
            FROM '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?(\[[^]/?#]*\]|[^:/?#]*)'))
    END, '')
$function$;

-- gaffer.limit_key_of(text, text, text, text, text, text, json) as 0029_limit_admit_cost left it
CREATE OR REPLACE FUNCTION gaffer.limit_key_of(key_from text, tenant text, kind text, queue text, limit_key text, fairness_key text, args json)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT coalesce(CASE
        WHEN key_from = '' THEN ''
        WHEN key_from = 'tenant' THEN tenant
        WHEN key_from = 'kind' THEN kind
        WHEN key_from = 'queue' THEN queue
        WHEN key_from = 'limit_key' THEN limit_key
        WHEN key_from = 'fairness_key' THEN fairness_key
        WHEN key_from LIKE 'args.%' THEN args #>> string_to_array(substr(key_from, 6), '.')
        WHEN key_from LIKE 'host(args.%)' THEN lower(substring(
            args #>> string_to_array(substr(key_from, 11, length(key_from) - 11), '.')
            FROM '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?(\[[^]/?#]*\]|[^:/?#]*)'))
    END, '')
$function$;

-- gaffer.queue_units(text, integer) as 0015_fair_limits left it
CREATE OR REPLACE FUNCTION gaffer.queue_units(q text, n integer)
 RETURNS TABLE(tenant text, fairness_key text)
 LANGUAGE sql
 STABLE
AS $function$
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
$function$;

-- gaffer.tenant_units(text, text, integer, text) as 0023_remote_claim left it
CREATE OR REPLACE FUNCTION gaffer.tenant_units(q text, t text, n integer, after_fkey text)
 RETURNS text[]
 LANGUAGE plpgsql
 STABLE
AS $function$
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
$function$;

-- gaffer.workflow_start_ready(bigint) as 0017_exact_payloads left it
CREATE OR REPLACE FUNCTION gaffer.workflow_start_ready(p_run bigint)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE
    r   gaffer.workflow_runs;
    st  gaffer.workflow_steps;
    jid bigint;
    n   integer := 0;
BEGIN
    SELECT * INTO r FROM gaffer.workflow_runs WHERE id = p_run;
    IF NOT FOUND OR r.state <> 'running' THEN
        RETURN 0;
    END IF;
    FOR st IN
        SELECT * FROM gaffer.workflow_steps
        WHERE run_id = p_run AND state = 'waiting' AND deps_left <= 0
        ORDER BY name
        FOR UPDATE
    LOOP
        INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, args, run_at, workflow_run, step, inputs)
        VALUES (r.tenant, st.kind, st.queue, st.priority, st.max_attempts, st.timeout_ms, st.args,
                now() + st.wait_ms * interval '1 millisecond', p_run, st.name,
                gaffer.step_results(p_run, st.depends_on))
        RETURNING id INTO jid;
        UPDATE gaffer.workflow_steps SET state = 'active', job_id = jid, started_at = clock_timestamp()
        WHERE run_id = p_run AND name = st.name;
        PERFORM pg_notify('gaffer_jobs', st.queue);
        n := n + 1;
    END LOOP;
    RETURN n;
END
$function$;

-- gaffer.workflow_step_replayed() as 0017_exact_payloads left it
CREATE OR REPLACE FUNCTION gaffer.workflow_step_replayed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    r gaffer.workflow_runs;
    s gaffer.workflow_steps;
BEGIN
    SELECT * INTO r FROM gaffer.workflow_runs WHERE id = NEW.workflow_run FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NEW;
    END IF;
    SELECT * INTO s FROM gaffer.workflow_steps WHERE run_id = NEW.workflow_run AND name = NEW.step FOR UPDATE;
    IF NOT FOUND OR s.state <> 'failed' OR r.state NOT IN ('running', 'failed') THEN
        RETURN NEW;
    END IF;
    NEW.inputs := gaffer.step_results(r.id, s.depends_on);
    -- The step starts over as workflow_start_ready starts it: a signal
    -- step's timer runs its whole timeout again (due at once, it would
    -- fail before any signal could arrive), a sleep sleeps again.
    NEW.run_at := now() + s.wait_ms * interval '1 millisecond';
    UPDATE gaffer.workflow_steps
    SET state = 'active', job_id = NEW.id, result = NULL, error = NULL, finished_at = NULL, started_at = clock_timestamp()
    WHERE run_id = s.run_id AND name = s.name;
    IF r.state = 'running' THEN
        PERFORM gaffer.workflow_count_deps(r.id, s.name);
    ELSIF NOT EXISTS (
        SELECT 1 FROM gaffer.workflow_steps
        WHERE run_id = r.id AND state = 'failed' AND NOT allow_failure AND name <> s.name) THEN
        UPDATE gaffer.workflow_runs SET state = 'running', finished_at = NULL, error = NULL WHERE id = r.id;
        -- Every step cancelled while the run was failed waits again: those
        -- the failure cancelled before they started, and those whose job
        -- was cancelled since (a cancel while the run was running would
        -- have cancelled the run, which no replay resumes). Keeping the
        -- latter cancelled would leave their dependents waiting for ever.
        UPDATE gaffer.workflow_steps
        SET state = 'waiting', job_id = NULL, result = NULL, error = NULL, cancel_reason = NULL,
            started_at = NULL, finished_at = NULL
        WHERE run_id = r.id AND state = 'cancelled';
        PERFORM gaffer.workflow_count_deps(r.id, NULL);
        PERFORM gaffer.workflow_start_ready(r.id);
    END IF;
    RETURN NEW;
END
$function$;
