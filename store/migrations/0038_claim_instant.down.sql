-- gaffer:generated
-- Back to the routines 0037_limits_full left, written by migrategen with
-- 0038_claim_instant.up.sql.
SET LOCAL check_function_bodies = off;

DROP FUNCTION gaffer.limit_admit(text, bigint[], text[], text[], text[], integer, text[], text[], integer[], timestamp with time zone);

-- gaffer.claim(text, integer, text, boolean, text, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer) as 0037_limits_full left it
CREATE OR REPLACE FUNCTION gaffer.claim(q text, n integer, claimer text, worker boolean, t text, ks text[], s_tenant text[], s_fkey text[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], after_tenant text, after_fkey text, k_tenant text[], k_fkey text[], grace_ms integer, OUT ids bigint[], OUT next_tenant text, OUT next_fkey text, OUT started_at timestamp with time zone, OUT busy boolean)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
DECLARE
    -- One claim looks at this many units, and weighs this many
    -- candidates, at most; the next claim goes on from where it stopped.
    max_units constant integer := 1024;
    max_weighed constant integer := 4096;
    side boolean := s_tenant IS NOT NULL;
    lo text := coalesce(t, '');
    top text := CASE WHEN t IS NULL THEN chr(1114111) ELSE t || chr(1) END;
    below_t text := coalesce(after_tenant, top);
    below_k text := CASE WHEN after_tenant IS NULL THEN '' ELSE after_fkey END;
    stop_t text := lo;
    stop_k text := '';
    wrapped boolean := after_tenant IS NULL;
    finding boolean := NOT side;
    take integer;
    m integer;
    nfound integer;
    visited integer := 0;
    weighed_all integer := 0;
    f_tenant text[];
    f_fkey text[];
    u_tenant text[];
    u_fkey text[];
    d_tenant text[] := '{}';
    d_fkey text[] := '{}';
    d_prio smallint[] := '{}';
    d_run_at timestamptz[] := '{}';
    d_id bigint[] := '{}';
    d_k integer[] := '{}';
    u_past integer[];
    r_tenant text[];
    r_fkey text[];
    r_prio smallint[];
    r_run_at timestamptz[];
    r_id bigint[];
    cand_id bigint[];
    cand_tenant text[];
    cand_kind text[];
    cand_fkey text[];
    cand_unit integer[];
    cand_k integer[];
    admitted bigint[];
    unit_more boolean[];
    -- h_*: what this claim admitted so far, per limit bucket
    h_name text[] := '{}';
    h_key text[] := '{}';
    h_got integer[] := '{}';
    adm record;
    weighed integer;
    refused boolean;
    turnless integer;
BEGIN
    next_tenant := after_tenant;
    next_fkey := after_fkey;
    started_at := now();
    busy := false;
    IF n < 1 OR EXISTS (SELECT 1 FROM gaffer.queues qq WHERE qq.name = q AND qq.paused) THEN
        RETURN;
    END IF;
    IF worker THEN
        PERFORM 1 FROM gaffer.nodes nd
        WHERE nd.id = claimer AND nd.kind = 'remote' AND nd.state <> 'dead' AND nd.drain_requested_at IS NULL;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    ELSIF EXISTS (SELECT 1 FROM gaffer.nodes nd WHERE nd.id = claimer AND nd.drain_requested_at IS NOT NULL) THEN
        RETURN;
    END IF;
    -- The limits stay as this claim reads them until it commits. While
    -- one is being changed, claim nothing: the change waits for the
    -- claims in flight, and the caller claims again shortly.
    IF NOT gaffer.limits_hold() THEN
        busy := true;
        RETURN;
    END IF;
    IF side THEN
        -- A side claim reads its units from their start.
        c_tenant := '{}';
    END IF;

    LOOP
        take := n - coalesce(cardinality(ids), 0);
        m := greatest(take, 32);
        u_tenant := d_tenant;
        u_fkey := d_fkey;
        u_past := d_k;
        IF side AND visited = 0 THEN
            u_tenant := s_tenant;
            u_fkey := s_fkey;
            visited := cardinality(s_tenant);
        ELSIF finding THEN
            SELECT array_agg(u.tenant), array_agg(u.fairness_key) INTO f_tenant, f_fkey
            FROM gaffer.claim_units(q, lo, below_t, below_k, stop_t, stop_k, m) u;
            nfound := coalesce(cardinality(f_tenant), 0);
            IF nfound > 0 THEN
                below_t := f_tenant[nfound];
                below_k := f_fkey[nfound];
            END IF;
            IF nfound < m AND NOT wrapped THEN
                -- This pass is over: around to the top, and down to where
                -- this claim began, in the same round.
                wrapped := true;
                below_t := top;
                below_k := '';
                stop_t := after_tenant;
                stop_k := after_fkey;
                SELECT f_tenant || array_agg(u.tenant), f_fkey || array_agg(u.fairness_key) INTO f_tenant, f_fkey
                FROM gaffer.claim_units(q, lo, below_t, below_k, stop_t, stop_k, m - nfound) u;
                IF coalesce(cardinality(f_tenant), 0) > nfound THEN
                    below_t := f_tenant[cardinality(f_tenant)];
                    below_k := f_fkey[cardinality(f_fkey)];
                END IF;
                nfound := coalesce(cardinality(f_tenant), 0);
            END IF;
            IF nfound < m THEN
                finding := false; -- every unit was found
            END IF;
            IF visited = 0 AND grace_ms > 0 AND nfound > 1 AND EXISTS (
                SELECT 1 FROM unnest(f_tenant, f_fkey) AS u(t, k) JOIN unnest(k_tenant, k_fkey) AS kn(t, k) ON kn.t = u.t AND kn.k = u.k) THEN
                -- The grace: a unit the last claim served is among those found.
                SELECT array_agg(u.t ORDER BY u.ord), array_agg(u.k ORDER BY u.ord) INTO f_tenant, f_fkey
                FROM unnest(f_tenant, f_fkey) WITH ORDINALITY AS u(t, k, ord)
                -- (CASE: a served unit is never probed. A scalar probe
                -- ordered as the claim index is, not EXISTS: the generic
                -- plan of an EXISTS may scan the table instead.)
                WHERE CASE WHEN EXISTS (SELECT 1 FROM unnest(k_tenant, k_fkey) AS kn(t, k) WHERE kn.t = u.t AND kn.k = u.k) THEN true
                           ELSE (SELECT j.id FROM gaffer.jobs j
                                 WHERE j.state IN ('pending', 'retrying') AND j.due AND j.queue = q
                                   AND j.tenant COLLATE "C" = u.t AND j.fairness_key COLLATE "C" = u.k
                                   AND j.run_at <= now() - grace_ms * interval '1 millisecond'
                                 ORDER BY j.priority, j.run_at, j.id LIMIT 1) IS NOT NULL END;
            END IF;
            visited := visited + nfound;
            u_tenant := u_tenant || f_tenant;
            u_fkey := u_fkey || f_fkey;
            u_past := u_past || array_fill(0, ARRAY[coalesce(cardinality(f_tenant), 0)]);
        END IF;
        IF coalesce(cardinality(u_tenant), 0) = 0 THEN
            EXIT WHEN NOT finding;
            CONTINUE;
        END IF;

        -- This round's cursors: the deeper units' own, the caller's for
        -- the others.
        IF cardinality(d_tenant) = 0 THEN
            r_tenant := c_tenant;
            r_fkey := c_fkey;
            r_prio := c_prio;
            r_run_at := c_run_at;
            r_id := c_id;
        ELSE
            SELECT array_agg(x.t), array_agg(x.k), array_agg(x.p), array_agg(x.r), array_agg(x.i) INTO r_tenant, r_fkey, r_prio, r_run_at, r_id
            FROM (SELECT * FROM unnest(d_tenant, d_fkey, d_prio, d_run_at, d_id) AS d(t, k, p, r, i)
                  UNION ALL
                  SELECT * FROM unnest(c_tenant, c_fkey, c_prio, c_run_at, c_id) AS c(t, k, p, r, i)
                  WHERE NOT EXISTS (SELECT 1 FROM unnest(d_tenant, d_fkey) AS d(t, k) WHERE d.t = c.t AND d.k = c.k)) x;
        END IF;
        SELECT * INTO cand_id, cand_kind, cand_tenant, cand_fkey, cand_unit, cand_k, unit_more
        FROM gaffer.claim_take(q, take, ks, u_tenant, u_fkey, u_past, r_tenant, r_fkey, r_prio, r_run_at, r_id) p;
        weighed := 0;
        admitted := NULL;
        d_tenant := '{}';
        d_fkey := '{}';
        d_prio := '{}';
        d_run_at := '{}';
        d_id := '{}';
        d_k := '{}';
        IF cand_id IS NOT NULL THEN
            -- Do the limits apply? Decided on the kinds and tenants taken:
            -- the default http-per-host limit costs a queue of other kinds
            -- nothing.
            IF EXISTS (SELECT 1 FROM gaffer.limits l
                       WHERE (l.queue IS NULL OR l.queue = q) AND (l.tenant IS NULL OR l.tenant = ANY (coalesce(cand_tenant, u_tenant)))
                         AND (l.kind IS NULL OR l.kind = ANY (cand_kind))) THEN
                IF cand_tenant IS NULL THEN
                    -- One unit's candidates: its tenant and key, in order.
                    cand_tenant := array_fill(u_tenant[1], ARRAY[cardinality(cand_id)]);
                    cand_fkey := array_fill(u_fkey[1], ARRAY[cardinality(cand_id)]);
                    cand_unit := array_fill(1, ARRAY[cardinality(cand_id)]);
                    cand_k := ARRAY(SELECT coalesce(u_past[1], 0) + generate_series(1, cardinality(cand_id)));
                END IF;
                SELECT * INTO adm FROM gaffer.limit_admit(q, cand_id, cand_tenant, cand_kind, cand_fkey, take, h_name, h_key, h_got) a;
                admitted := adm.admitted;
                weighed := adm.considered;
                started_at := adm.admitted_at;
                IF adm.b_name IS NOT NULL THEN
                    SELECT array_agg(x.name), array_agg(x.key), array_agg(x.got) INTO h_name, h_key, h_got
                    FROM (SELECT y.name, y.key, sum(y.got)::integer AS got
                          FROM (SELECT * FROM unnest(h_name, h_key, h_got) UNION ALL SELECT * FROM unnest(adm.b_name, adm.b_key, adm.b_got)) y(name, key, got)
                          GROUP BY y.name, y.key) x;
                END IF;
            ELSE
                admitted := cand_id[1:take];
                weighed := least(cardinality(cand_id), take);
            END IF;
            ids := ids || admitted;
            -- A limit refused some: does one leave no room for any job of
            -- the queue? Then nothing more can start in this claim.
            refused := coalesce(cardinality(admitted), 0) < weighed;
            IF refused AND coalesce(cardinality(ids), 0) < n AND gaffer.limits_full(q, NULL, NULL) THEN
                IF NOT side THEN
                    next_tenant := CASE WHEN finding THEN below_t END;
                    next_fkey := CASE WHEN finding THEN below_k END;
                END IF;
                EXIT;
            END IF;
            IF coalesce(cardinality(ids), 0) < n AND true = ANY (unit_more) THEN
                -- Not full: the units that may have more, all of whose
                -- candidates were weighed, are looked into deeper, past
                -- their last candidate — past those a limit refused, too.
                IF cand_tenant IS NULL THEN
                    cand_tenant := array_fill(u_tenant[1], ARRAY[cardinality(cand_id)]);
                    cand_fkey := array_fill(u_fkey[1], ARRAY[cardinality(cand_id)]);
                    cand_unit := array_fill(1, ARRAY[cardinality(cand_id)]);
                    cand_k := ARRAY(SELECT coalesce(u_past[1], 0) + generate_series(1, cardinality(cand_id)));
                END IF;
                SELECT coalesce(array_agg(x.tenant ORDER BY x.unit), '{}'), coalesce(array_agg(x.fkey ORDER BY x.unit), '{}'),
                       coalesce(array_agg(p.prio ORDER BY x.unit), '{}'), coalesce(array_agg(p.run_at ORDER BY x.unit), '{}'),
                       coalesce(array_agg(x.id ORDER BY x.unit), '{}'), coalesce(array_agg(x.k ORDER BY x.unit), '{}')
                INTO d_tenant, d_fkey, d_prio, d_run_at, d_id, d_k
                FROM (SELECT DISTINCT ON (c.unit) c.unit, c.tenant, c.fkey, c.id, c.k
                      FROM unnest(cand_id, cand_tenant, cand_fkey, cand_unit, cand_k) AS c(id, tenant, fkey, unit, k)
                      WHERE unit_more[c.unit]
                        AND c.unit NOT IN (SELECT r.unit FROM unnest(cand_unit) WITH ORDINALITY AS r(unit, i) WHERE r.i > weighed)
                      ORDER BY c.unit, c.k DESC) x
                -- (its last candidate's place, by the primary key: LIMIT
                -- keeps the planner from making it a join, which it may
                -- plan as a scan of the table while its statistics are new)
                CROSS JOIN LATERAL (SELECT j.priority AS prio, j.run_at FROM gaffer.jobs j WHERE j.id = x.id LIMIT 1) p
                -- (not a unit a limit has no room left for)
                WHERE NOT refused OR NOT gaffer.limits_full(q, x.tenant, x.fkey);
            END IF;
        END IF;
        weighed_all := weighed_all + weighed;

        IF coalesce(cardinality(ids), 0) >= n THEN
            -- Full. A unit whose first candidate was not weighed did not
            -- have its turn: the next claim starts with the first such.
            turnless := NULL;
            IF weighed < cardinality(cand_id) THEN
                SELECT cand_unit[i] INTO turnless FROM generate_series(weighed + 1, cardinality(cand_id)) i
                WHERE cand_k[i] = 1 ORDER BY i LIMIT 1;
            END IF;
            IF side THEN
                NULL;
            ELSIF turnless IS NOT NULL THEN
                next_tenant := u_tenant[turnless - 1];
                next_fkey := u_fkey[turnless - 1];
            ELSIF finding THEN
                next_tenant := below_t;
                next_fkey := below_k;
            ELSE
                next_tenant := NULL; -- every unit had its turn
                next_fkey := NULL;
            END IF;
            EXIT;
        END IF;
        IF visited >= max_units OR weighed_all >= max_weighed THEN
            IF NOT side THEN
                next_tenant := CASE WHEN finding THEN below_t END;
                next_fkey := CASE WHEN finding THEN below_k END;
            END IF;
            EXIT;
        END IF;
        IF NOT finding AND cardinality(d_tenant) = 0 THEN
            IF NOT side THEN
                next_tenant := NULL; -- every unit had its turn
                next_fkey := NULL;
            END IF;
            EXIT;
        END IF;
    END LOOP;
END
$function$;

-- gaffer.limit_admit(text, bigint[], text[], text[], text[], integer, text[], text[], integer[]) as 0031_one_claim left it
CREATE OR REPLACE FUNCTION gaffer.limit_admit(q text, c_id bigint[], c_tenant text[], c_kind text[], c_fkey text[], cap integer, h_name text[], h_key text[], h_got integer[], OUT admitted bigint[], OUT considered integer, OUT admitted_at timestamp with time zone, OUT b_name text[], OUT b_key text[], OUT b_got integer[])
 RETURNS record
 LANGUAGE plpgsql
AS $function$
DECLARE
    nc integer := coalesce(cardinality(c_id), 0);
    read_key boolean;
    read_args boolean;
    c_lkey text[];
    c_args json[];
    p_cand integer[];
    p_bucket integer[];
    b_want integer[];
    b_free integer[];
    b_running integer[];
    b_counted boolean[];
    b_tokens double precision[];
    b_held boolean[];
    last_name text;
    last_key text;
    lock_wait text;
    ok boolean;
    pi integer := 1;
    first integer;
BEGIN
    admitted_at := clock_timestamp();
    IF nc = 0 THEN
        considered := 0;
        RETURN;
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

    -- Each candidate's buckets: the candidates alike in what the limits
    -- read are keyed once.
    WITH cands AS (
        SELECT c.ord::integer AS cand, c.tenant, c.kind, c.fkey, c_lkey[c.ord] AS lkey, c_args[c.ord] AS args,
               dense_rank() OVER (ORDER BY c.tenant, c.kind, c.fkey, c_lkey[c.ord], c_args[c.ord]::text) AS grp
        FROM unnest(c_tenant, c_kind, c_fkey) WITH ORDINALITY AS c(tenant, kind, fkey, ord)
    ), keyed AS (
        SELECT g.grp, l.name, gaffer.limit_key_of(l.key_from, g.tenant, g.kind, q, g.lkey, g.fkey, g.args) AS key
        FROM (SELECT DISTINCT ON (grp) grp, tenant, kind, fkey, lkey, args FROM cands) g
        JOIN gaffer.limits l ON (l.queue IS NULL OR l.queue = q) AND (l.kind IS NULL OR l.kind = g.kind)
                            AND (l.tenant IS NULL OR l.tenant = g.tenant)
    ), buckets AS (
        SELECT k.name, k.key, row_number() OVER (ORDER BY k.name, k.key)::integer AS b
        FROM (SELECT DISTINCT name, key FROM keyed) k
    ), pairs AS (
        SELECT c.cand, b.b FROM cands c JOIN keyed k ON k.grp = c.grp JOIN buckets b ON b.name = k.name AND b.key = k.key
    )
    SELECT (SELECT array_agg(b.name ORDER BY b.b) FROM buckets b),
           (SELECT array_agg(b.key ORDER BY b.b) FROM buckets b),
           (SELECT array_agg(coalesce(w.n, 0)::integer ORDER BY b.b)
            FROM buckets b LEFT JOIN (SELECT p.b, count(*) AS n FROM pairs p GROUP BY p.b) w ON w.b = b.b),
           (SELECT array_agg(p.cand ORDER BY p.cand, p.b) FROM pairs p),
           (SELECT array_agg(p.b ORDER BY p.cand, p.b) FROM pairs p)
    INTO b_name, b_key, b_want, p_cand, p_bucket;
    IF b_name IS NULL THEN
        admitted := c_id[1:cap];
        considered := least(nc, cap);
        RETURN;
    END IF;

    -- Created if new, then locked, in one order. The calling claim holds
    -- the buckets of its earlier rounds (h_*): one that sorts before the
    -- last of those is not waited for — taken if no other claim holds it,
    -- else its candidates wait for the next claim — so that no two claims
    -- wait for each other's buckets.
    SELECT h.name, h.key INTO last_name, last_key FROM unnest(h_name, h_key) AS h(name, key) ORDER BY 1 DESC, 2 DESC LIMIT 1;
    -- One statement creates each bucket or locks it, one bucket after
    -- another in that order (an existing one is locked, not updated:
    -- WHERE false), so that a new bucket, held by its insert, is never
    -- held before one that sorts before it.
    INSERT INTO gaffer.limit_buckets AS lb (limit_name, key, tokens, refilled_at)
    SELECT b.name, b.key, coalesce(l.burst, 0), clock_timestamp()
    FROM unnest(b_name, b_key) AS b(name, key) JOIN gaffer.limits l ON l.name = b.name
    WHERE last_name IS NULL OR (b.name, b.key) > (last_name, last_key)
    ORDER BY b.name, b.key
    ON CONFLICT (limit_name, key) DO UPDATE SET tokens = lb.tokens WHERE false;
    b_held := array_fill(true, ARRAY[cardinality(b_name)]);
    IF last_name IS NOT NULL AND EXISTS (
        SELECT 1 FROM unnest(b_name, b_key) AS e(name, key)
        WHERE (e.name, e.key) <= (last_name, last_key)
          AND NOT EXISTS (SELECT 1 FROM gaffer.limit_buckets lb WHERE lb.limit_name = e.name AND lb.key = e.key)) THEN
        -- Those not made yet are made here, unless another claim is making
        -- one of them: an insert waits for another's insert of the same
        -- bucket, and not for more than a moment here, or two claims
        -- could wait for each other.
        lock_wait := current_setting('lock_timeout');
        BEGIN
            PERFORM set_config('lock_timeout', '5ms', true);
            INSERT INTO gaffer.limit_buckets (limit_name, key, tokens, refilled_at)
            SELECT e.name, e.key, coalesce(l.burst, 0), clock_timestamp()
            FROM unnest(b_name, b_key) AS e(name, key) JOIN gaffer.limits l ON l.name = e.name
            WHERE (e.name, e.key) <= (last_name, last_key)
            ORDER BY e.name, e.key
            ON CONFLICT (limit_name, key) DO NOTHING;
            PERFORM set_config('lock_timeout', lock_wait, true);
        EXCEPTION WHEN lock_not_available THEN
            NULL; -- their candidates wait for the next claim
        END;
    END IF;
    IF last_name IS NOT NULL THEN
        SELECT array_agg(lk.k IS NOT NULL OR (b.name, b.key) > (last_name, last_key) ORDER BY b.ord) INTO b_held
        FROM unnest(b_name, b_key) WITH ORDINALITY AS b(name, key, ord)
        LEFT JOIN (SELECT lb.limit_name, lb.key, true AS k FROM gaffer.limit_buckets lb
                   WHERE (lb.limit_name, lb.key) IN (SELECT e.name, e.key FROM unnest(b_name, b_key) AS e(name, key)
                                                     WHERE (e.name, e.key) <= (last_name, last_key))
                   FOR UPDATE OF lb SKIP LOCKED) lk ON lk.limit_name = b.name AND lk.key = b.key;
    END IF;
    admitted_at := clock_timestamp();

    -- A new statement, so a new snapshot. Per bucket, in b order: the
    -- running attempts it counts (its bound when its candidates fit under
    -- it, else counted), whether they were counted, its whole tokens
    -- refilled, and its free slots. A bucket whose limit is gone limits
    -- nothing.
    SELECT array_agg(f.running ORDER BY f.b), array_agg(f.counted ORDER BY f.b), array_agg(f.tokens ORDER BY f.b),
           array_agg(CASE WHEN NOT b_held[f.b] THEN 0
                          ELSE least(CASE WHEN f.concurrency IS NULL THEN 2147483647 ELSE greatest(f.concurrency - f.running, 0) END,
                                     CASE WHEN f.tokens IS NULL THEN 2147483647 ELSE floor(f.tokens)::integer END) END ORDER BY f.b)
    INTO b_running, b_counted, b_tokens, b_free
    FROM (
        SELECT b.b, l.concurrency, t.tokens,
               l.concurrency IS NOT NULL AND NOT coalesce(lb.running_bound + b.want <= l.concurrency, false) AS counted,
               CASE WHEN l.concurrency IS NULL THEN 0
                    WHEN lb.running_bound + b.want <= l.concurrency THEN lb.running_bound
                    ELSE (SELECT count(*) FROM gaffer.jobs r
                          WHERE r.state = 'running' AND (l.queue IS NULL OR r.queue = l.queue)
                            AND (l.kind IS NULL OR r.kind = l.kind) AND (l.tenant IS NULL OR r.tenant = l.tenant)
                            AND gaffer.limit_key_of(l.key_from, r.tenant, r.kind, r.queue, r.limit_key, r.fairness_key, r.args) = b.key)::integer
                         -- and what the calling claim admitted in its earlier rounds, not yet running
                         + coalesce((SELECT sum(h.got) FROM unnest(h_name, h_key, h_got) AS h(name, key, got)
                                     WHERE h.name = b.name AND h.key = b.key), 0)::integer
               END AS running
        FROM unnest(b_name, b_key, b_want) WITH ORDINALITY AS b(name, key, want, b)
        LEFT JOIN gaffer.limits l ON l.name = b.name
        LEFT JOIN gaffer.limit_buckets lb ON lb.limit_name = b.name AND lb.key = b.key
        CROSS JOIN LATERAL (SELECT CASE WHEN l.rate IS NULL THEN NULL
                                       WHEN lb.limit_name IS NULL THEN 0
                                       ELSE least(l.burst::double precision, lb.tokens
                                            + greatest(extract(epoch FROM admitted_at - lb.refilled_at), 0) * 1000 / l.period_ms * l.rate)
                                  END AS tokens) t
    ) f;

    b_got := array_fill(0, ARRAY[cardinality(b_name)]);
    IF nc <= cap AND NOT EXISTS (SELECT 1 FROM unnest(b_want, b_free) AS w(want, free) WHERE w.want > w.free) THEN
        -- Every candidate fits.
        admitted := c_id;
        considered := nc;
        b_got := b_want;
    ELSE
        -- In claim order: a candidate starts if each of its buckets has a
        -- slot left, and takes one in each.
        considered := 0;
        FOR i IN 1..nc LOOP
            EXIT WHEN coalesce(cardinality(admitted), 0) >= cap;
            considered := i;
            ok := true;
            first := pi;
            WHILE pi <= cardinality(p_cand) AND p_cand[pi] = i LOOP
                IF b_free[p_bucket[pi]] - b_got[p_bucket[pi]] < 1 THEN
                    ok := false;
                END IF;
                pi := pi + 1;
            END LOOP;
            IF ok THEN
                FOR x IN first..pi - 1 LOOP
                    b_got[p_bucket[x]] := b_got[p_bucket[x]] + 1;
                END LOOP;
                admitted := admitted || c_id[i];
            END IF;
        END LOOP;
    END IF;

    -- Bounds rise by the admitted (a count sets them), rate buckets spend
    -- a token per admitted start.
    UPDATE gaffer.limit_buckets lb
    SET running_bound = CASE WHEN b.counted THEN b.running + b.got
                             WHEN lb.running_bound IS NOT NULL THEN lb.running_bound + b.got END,
        tokens = CASE WHEN b.tokens IS NULL THEN lb.tokens ELSE b.tokens - b.got END,
        refilled_at = CASE WHEN b.tokens IS NULL THEN lb.refilled_at ELSE greatest(lb.refilled_at, admitted_at) END
    FROM unnest(b_name, b_key, b_running, b_counted, b_tokens, b_got) WITH ORDINALITY AS b(name, key, running, counted, tokens, got, b)
    WHERE lb.limit_name = b.name AND lb.key = b.key AND (b.got > 0 OR b.counted) AND b_held[b.b];
END
$function$;
