-- Cluster-wide limits (G10), enforced inside the claim: the key a limit
-- counts a job under, and limit_admit, which keeps of a claim's
-- candidates those every limit bucket has room for. The tables are
-- gaffer.limits and gaffer.limit_buckets (tables.sql); docs/limits.md
-- says what limits promise.

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

-- The key a limit counts a job under, from the job's columns
-- (limit_key(key_from, j) without the whole row; args may be NULL when
-- key_from does not read them).
CREATE FUNCTION gaffer.limit_key_of(key_from text, tenant text, kind text, queue text,
    limit_key text, fairness_key text, args json) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
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
$$;

-- Whether limit l applies to job j.
CREATE FUNCTION gaffer.limit_applies(l gaffer.limits, j gaffer.jobs) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (l.queue IS NULL OR l.queue = j.queue) AND (l.kind IS NULL OR l.kind = j.kind)
       AND (l.tenant IS NULL OR l.tenant = j.tenant)
$$;

-- limit_admit returns the ids of the candidates of queue q (c_*: their
-- ids, tenants, kinds and fairness keys; the rows locked by the caller,
-- which it reads for what else it needs) that the limits let start now:
-- those no limit applies to, and those whose every bucket has a slot
-- (running attempts below concurrency) and a token (rate) left, taken in
-- fair order per bucket (a unit's k-th candidate ranks k/weight). The
-- buckets are locked, in one order, in a statement of their own, and read
-- after it in a new snapshot: the bounds and counts see every claim that
-- took one of these buckets before. Tokens are spent and bounds raised
-- for the admitted.
--
-- It reads the candidates' limit keys and args only when a limit that
-- applies is keyed by them, and their priorities and run_ats only when a
-- bucket binds (they are for its fair order). It groups the candidates
-- alike in what the limits read before joining the limits.
--
-- Each bucket keeps an upper bound on the running attempts it counts,
-- running_bound: set from an exact count, raised by every claim it
-- admits, never lowered (an attempt's end leaves it as it is). A claim
-- whose candidates fit under the bound (bound + wanted <= concurrency)
-- cannot be refused by that bucket, and is admitted without counting;
-- any other claim counts the running attempts, and sets the bound afresh
-- from that count. The bound is over the true count, so it admits
-- nothing the exact count would refuse: a slot still comes back only when
-- the attempt holding it is over and a count sees it.
--
-- Why the bound is never below the running attempts of its bucket: only a
-- claim starts an attempt, and a claim that sees the limit as it is locks
-- the bucket and raises its bound by what it admits, in the transaction
-- that starts them. A claim that did not see the limit as it is (it took
-- its snapshot before the limit was made or changed, and commits after)
-- is the exception; two things cover it:
--
-- - a change to a limit clears its buckets' bounds (trigger
--   limits_changed); a new limit has no buckets;
-- - an exact count sets a bound only when no transaction that could have
--   missed the limit's latest change is still in progress, and its own
--   transaction began after it: the bucket's bound_fence is an xid
--   assigned after that change committed (the next xid of the first
--   snapshot that saw the bucket without a fence), and a count's snapshot
--   whose xmin is at or past it sees every transaction that started
--   before it, committed. A claim takes its xid when it locks its first
--   candidate, before it reads the limits; so one that missed the change
--   has an xid below the fence. Otherwise the count still decides the
--   claim, and the bound stays unset.
CREATE FUNCTION gaffer.limit_admit(q text, c_id bigint[], c_tenant text[], c_kind text[], c_fkey text[])
RETURNS bigint[]
LANGUAGE plpgsql AS $fn$
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
$fn$;

-- The signature of migration 0015, for any caller of it: the candidates'
-- rows, passed on as columns.
CREATE FUNCTION gaffer.limit_admit(q text, cands gaffer.jobs[]) RETURNS bigint[]
LANGUAGE sql AS $fn$
    SELECT gaffer.limit_admit(q, array_agg(c.id), array_agg(c.tenant), array_agg(c.kind), array_agg(c.fairness_key))
    FROM unnest(cands) c
$fn$;

-- A changed limit (scope, key, concurrency) starts its bounds afresh. A
-- claim holding a bucket's lock finishes first.
CREATE FUNCTION gaffer.limit_changed() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    UPDATE gaffer.limit_buckets SET running_bound = NULL, bound_fence = NULL
    WHERE limit_name = OLD.name AND (running_bound IS NOT NULL OR bound_fence IS NOT NULL);
    RETURN NULL;
END
$fn$;

CREATE TRIGGER limits_changed AFTER UPDATE ON gaffer.limits
    FOR EACH ROW EXECUTE FUNCTION gaffer.limit_changed();
