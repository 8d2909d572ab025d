-- Back to migration 0028's claim_pick, 0027's claim_pick_units, 0024's
-- claim_pick_remote and 0015's limit_admit.
CREATE OR REPLACE FUNCTION gaffer.claim_pick(q text, n integer, node_id text,
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

CREATE OR REPLACE FUNCTION gaffer.claim_pick_units(q text, n integer, node_id text, u_tenant text[], u_fkey text[])
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
        ids := gaffer.limit_admit(q, (SELECT array_agg(j) FROM gaffer.jobs j WHERE j.id = ANY (ids)));
    END IF;
    RETURN ids;
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

CREATE OR REPLACE FUNCTION gaffer.limit_admit(q text, cands gaffer.jobs[]) RETURNS bigint[]
LANGUAGE plpgsql AS $fn$
DECLARE
    b_name text[];
    b_key text[];
    b_want integer[];
    b_free double precision[];
    b_tokens double precision[];
    admitted bigint[];
    binds boolean;
BEGIN
    IF cands IS NULL THEN
        RETURN NULL;
    END IF;
    -- The buckets the candidates fall in, and how many want each.
    SELECT array_agg(x.name ORDER BY x.name, x.key), array_agg(x.key ORDER BY x.name, x.key), array_agg(x.n ORDER BY x.name, x.key)
    INTO b_name, b_key, b_want
    FROM (
        SELECT l.name, gaffer.limit_key(l.key_from, c) AS key, count(*)::integer AS n
        FROM unnest(cands) c JOIN gaffer.limits l ON gaffer.limit_applies(l, c)
        GROUP BY 1, 2
    ) x;
    IF b_name IS NULL THEN
        RETURN (SELECT array_agg(c.id) FROM unnest(cands) c);
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
    -- locks were granted. Free slots per bucket: the concurrency left after
    -- the running attempts it counts, and the whole tokens refilled.
    SELECT array_agg(f.slots ORDER BY f.ord), array_agg(f.tokens ORDER BY f.ord) INTO b_free, b_tokens
    FROM (
        SELECT b.ord, t.tokens,
               least(CASE WHEN l.concurrency IS NULL THEN 2147483647
                          ELSE l.concurrency - (SELECT count(*) FROM gaffer.jobs r
                                                WHERE r.state = 'running' AND (l.queue IS NULL OR r.queue = l.queue)
                                                  AND gaffer.limit_applies(l, r) AND gaffer.limit_key(l.key_from, r) = b.key) END,
                     CASE WHEN l.rate IS NULL THEN 2147483647 ELSE floor(t.tokens) END) AS slots
        FROM unnest(b_name, b_key) WITH ORDINALITY AS b(name, key, ord)
        JOIN gaffer.limits l ON l.name = b.name
        JOIN gaffer.limit_buckets lb ON lb.limit_name = b.name AND lb.key = b.key
        CROSS JOIN LATERAL (SELECT CASE WHEN l.rate IS NULL THEN NULL
                                       ELSE least(l.burst::double precision, lb.tokens
                                            + extract(epoch FROM now() - lb.refilled_at) * 1000 / l.period_ms * l.rate) END AS tokens) t
    ) f;

    binds := EXISTS (SELECT 1 FROM unnest(b_want, b_free) AS w(want, free) WHERE w.want > w.free);
    IF NOT binds THEN
        admitted := (SELECT array_agg(c.id) FROM unnest(cands) c);
    ELSE
        -- Some bucket has fewer slots than candidates: take each bucket's
        -- in fair order; a candidate refused by any of its buckets waits.
        WITH pairs AS (
            SELECT c.id, l.name, gaffer.limit_key(l.key_from, c) AS key,
                   row_number() OVER (PARTITION BY c.tenant, c.fairness_key ORDER BY c.priority, c.run_at, c.id)
                       / coalesce(tw.weight, 1)::double precision AS rank
            FROM unnest(cands) c
            JOIN gaffer.limits l ON gaffer.limit_applies(l, c)
            LEFT JOIN gaffer.tenant_weights tw ON tw.tenant = c.tenant
        ), ranked AS (
            SELECT p.id, p.name, p.key, row_number() OVER (PARTITION BY p.name, p.key ORDER BY p.rank, p.id) AS pos
            FROM pairs p
        ), refused AS (
            SELECT DISTINCT rk.id
            FROM ranked rk JOIN unnest(b_name, b_key, b_free) AS b(name, key, free) ON b.name = rk.name AND b.key = rk.key
            WHERE rk.pos > b.free
        )
        SELECT array_agg(c.id) INTO admitted FROM unnest(cands) c WHERE c.id NOT IN (SELECT rf.id FROM refused rf);
    END IF;

    -- Rate buckets spend a token per admitted start.
    IF EXISTS (SELECT 1 FROM unnest(b_tokens) t WHERE t IS NOT NULL) THEN
        UPDATE gaffer.limit_buckets lb
        SET tokens = b.tokens - (SELECT count(*) FROM unnest(cands) c
                                 WHERE c.id = ANY (admitted) AND gaffer.limit_applies(l, c) AND gaffer.limit_key(l.key_from, c) = b.key),
            refilled_at = now()
        FROM unnest(b_name, b_key, b_tokens) AS b(name, key, tokens)
        JOIN gaffer.limits l ON l.name = b.name
        WHERE lb.limit_name = b.name AND lb.key = b.key AND b.tokens IS NOT NULL;
    END IF;
    RETURN admitted;
END
$fn$;

DROP FUNCTION gaffer.limit_admit(text, bigint[], text[], text[], text[]);
DROP FUNCTION gaffer.limit_key_of(text, text, text, text, text, text, json);
DROP TRIGGER limits_changed ON gaffer.limits;
DROP FUNCTION gaffer.limit_changed();
ALTER TABLE gaffer.limit_buckets DROP COLUMN running_bound, DROP COLUMN bound_fence;
