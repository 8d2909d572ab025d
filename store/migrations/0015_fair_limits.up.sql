-- Fair claiming across tenants (and a key a job names), cluster-wide
-- concurrency and rate limits, enforced inside the claim (G10).

-- A job's fairness unit is (tenant, fairness_key): within a queue, each
-- claim shares its slots among the units with due jobs, by weight. An http
-- job's fairness key is its destination host unless it names one.
ALTER TABLE gaffer.jobs ADD COLUMN fairness_key text NOT NULL DEFAULT '';
-- A key limits may count the job under (key_from 'limit_key').
ALTER TABLE gaffer.jobs ADD COLUMN limit_key text;

-- The claim index, keyed by unit: a claim takes each unit's first due jobs
-- by (priority, run_at, id) from its own range, and finds the units by
-- skipping from one to the next. Units sort by bytes (COLLATE "C"),
-- whatever the database's collation, so that a node can tell where a claim
-- stopped among them.
CREATE INDEX jobs_claim_unit_idx ON gaffer.jobs (queue, tenant COLLATE "C", fairness_key COLLATE "C", priority, run_at, id) INCLUDE (state)
    WHERE state IN ('pending', 'retrying');
DROP INDEX gaffer.jobs_claim_idx;
ALTER INDEX gaffer.jobs_claim_unit_idx RENAME TO jobs_claim_idx;

-- A tenant's share of each claim, relative to the others' (default 1).
CREATE TABLE gaffer.tenant_weights (
    tenant     text PRIMARY KEY,
    weight     integer     NOT NULL CHECK (weight BETWEEN 1 AND 1000),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- A limit caps the jobs it matches (by queue, kind and tenant; NULL
-- matches any), counted per key (key_from; '' is one bucket for all):
-- at most concurrency running at once, and at most rate starts per
-- period, in bursts of up to burst.
CREATE TABLE gaffer.limits (
    name        text PRIMARY KEY,
    queue       text,
    kind        text,
    tenant      text,
    key_from    text        NOT NULL DEFAULT '',
    concurrency integer     CHECK (concurrency >= 1),
    rate        integer     CHECK (rate >= 1),
    period_ms   bigint      CHECK (period_ms >= 1),
    burst       integer     CHECK (burst >= 1),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT limits_something_check CHECK (concurrency IS NOT NULL OR rate IS NOT NULL),
    CONSTRAINT limits_rate_fields_check CHECK ((rate IS NULL) = (period_ms IS NULL) AND (rate IS NULL) = (burst IS NULL)),
    CONSTRAINT limits_key_check CHECK (key_from IN ('', 'tenant', 'kind', 'queue', 'limit_key', 'fairness_key')
        OR key_from ~ '^args(\.[A-Za-z0-9_-]+)+$' OR key_from ~ '^host\(args(\.[A-Za-z0-9_-]+)+\)$')
);

-- Per-key state: the lock claims take to count a key's slots one at a
-- time, and a rate limit's tokens.
CREATE TABLE gaffer.limit_buckets (
    limit_name  text        NOT NULL REFERENCES gaffer.limits (name) ON DELETE CASCADE,
    key         text        NOT NULL,
    tokens      double precision NOT NULL DEFAULT 0,
    refilled_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (limit_name, key)
);

-- The http kind calls one destination per job: by default at most 10 of
-- them run at once per destination host, so one slow receiver cannot take
-- every slot. Change or delete it like any limit.
INSERT INTO gaffer.limits (name, kind, key_from, concurrency)
VALUES ('http-per-host', 'http', 'host(args.url)', 10);

-- The key a limit counts job j under.
CREATE FUNCTION gaffer.limit_key(key_from text, j gaffer.jobs) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
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
$$;

-- Whether limit l applies to job j.
CREATE FUNCTION gaffer.limit_applies(l gaffer.limits, j gaffer.jobs) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (l.queue IS NULL OR l.queue = j.queue) AND (l.kind IS NULL OR l.kind = j.kind)
       AND (l.tenant IS NULL OR l.tenant = j.tenant)
$$;

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
-- Limits: when a limit may apply to the jobs taken, limit_admit keeps
-- only those whose every limit bucket has room; the others stay pending
-- and due.
--
-- The work is in PL/pgSQL so that its plans are cached per connection,
-- like a prepared statement's.
CREATE FUNCTION gaffer.claim_pick(q text, n integer, node_id text,
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
-- queue_units). With after_tenant set (the caller's previous claim served n units, so
-- there may be more), it starts below that unit and wraps around. None
-- for a paused queue or a draining node (from the first claim whose
-- snapshot sees the order).
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

-- fair_take locks and returns the ids of up to take due jobs of the
-- given units of queue q: each unit's share of take by weight (phase 1),
-- then the slots left from the units that filled their share, past what
-- they gave (phase 2). Each unit's jobs come by (priority, run_at, id)
-- past its cursor (c_*).
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

-- limit_admit returns the ids of the candidates (cands: their rows,
-- locked by the caller) that the limits let start now: those no limit
-- applies to, and those whose every bucket has a slot (running attempts
-- below concurrency) and a token (rate) left, taken in fair order per
-- bucket (a unit's k-th candidate ranks k/weight). The buckets are locked,
-- in one order, in a statement of their own, and counted after it in a new
-- snapshot: the counts see every claim that took one of these buckets
-- before. Tokens are spent for the admitted.
CREATE FUNCTION gaffer.limit_admit(q text, cands gaffer.jobs[]) RETURNS bigint[]
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
