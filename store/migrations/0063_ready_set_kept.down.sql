-- Written by migrategen with 0063's up file (the routines); the ready
-- rows go with the tables, in 0062's down file.
-- Back to the routines 0062_ready_set left, written by migrategen with
-- 0063_ready_set_kept.up.sql.
SET LOCAL check_function_bodies = off;

DROP TRIGGER ready_cleared ON gaffer.jobs;
DROP TRIGGER ready_enter ON gaffer.jobs;
DROP TRIGGER ready_follow ON gaffer.jobs;
DROP TRIGGER ready_gone ON gaffer.jobs;
DROP TRIGGER workflow_job_finished ON gaffer.jobs;
DROP FUNCTION gaffer.claim_from_unit(text, text, text, text[], smallint, timestamp with time zone, bigint, integer);
DROP FUNCTION gaffer.claim_from_units(text, integer, text[], text[], text[], integer[], text[], text[], smallint[], timestamp with time zone[], bigint[]);
DROP FUNCTION gaffer.claim_ready(text, integer, text, boolean, text, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer);
DROP FUNCTION gaffer.job_finishes(text, text);
DROP FUNCTION gaffer.job_ready_turns(text, text);
DROP FUNCTION gaffer.ready_cleared();
DROP FUNCTION gaffer.ready_enter();
DROP FUNCTION gaffer.ready_follow();
DROP FUNCTION gaffer.ready_gone();
DROP FUNCTION gaffer.ready_leave(smallint[], tid[], bigint[]);
DROP FUNCTION gaffer.ready_rotate(integer, integer);

-- gaffer.claim(text, integer, text, boolean, text, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer) as 0061_claim_says_limit_refused left it
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
    -- the instant this claim's jobs start, once a limit admitted any
    admit_at timestamptz;
    adm record;
    weighed integer;
    refused boolean;
    turnless integer;
    -- what of the limits can apply to this queue's jobs: a limit of
    -- every kind (lim_any), the kinds limits name (lim_kinds)
    lim_any boolean;
    lim_kinds text[];
    limited boolean;
    stopped boolean;
BEGIN
    next_tenant := after_tenant;
    next_fkey := after_fkey;
    started_at := now();
    busy := false;
    IF n < 1 THEN
        RETURN;
    END IF;
    -- The limits stay as this claim reads them until it commits. While
    -- one is being changed, claim nothing: the change waits for the
    -- claims in flight, and the caller claims again shortly.
    IF NOT gaffer.limits_hold() THEN
        busy := true;
        RETURN;
    END IF;
    -- The gate, in one statement: a paused queue, a draining node, or a
    -- remote worker that is draining, gone or unknown claims nothing; and
    -- which limits can apply here at all (the rounds look closer only at
    -- candidates these could apply to).
    SELECT EXISTS (SELECT 1 FROM gaffer.queues qq WHERE qq.name = q AND qq.paused)
           OR CASE WHEN worker
                   THEN NOT EXISTS (SELECT 1 FROM gaffer.nodes nd WHERE nd.id = claimer AND nd.kind = 'remote'
                                      AND nd.state <> 'dead' AND nd.drain_requested_at IS NULL)
                   ELSE EXISTS (SELECT 1 FROM gaffer.nodes nd WHERE nd.id = claimer AND nd.drain_requested_at IS NOT NULL) END,
           coalesce(bool_or(l.kind IS NULL), false), coalesce(array_agg(l.kind) FILTER (WHERE l.kind IS NOT NULL), '{}')
    INTO stopped, lim_any, lim_kinds
    FROM (SELECT 1) one LEFT JOIN gaffer.limits l ON l.queue IS NULL OR l.queue = q;
    IF stopped THEN
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
            IF visited = 0 AND grace_ms > 0 AND nfound > 1 THEN
                -- (An IF of its own: an EXISTS is a statement, run only when
                -- it can matter.)
                IF EXISTS (
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
        IF cardinality(u_tenant) = 1 THEN
            -- One unit: its first due jobs past its cursor, ids and kinds
            -- only (the rest is the unit's, in order, filled in below when
            -- it is needed).
            SELECT array_agg(x.id), array_agg(x.kind) INTO cand_id, cand_kind
            FROM (SELECT c.prio, c.run_at, c.id FROM unnest(r_tenant, r_fkey, r_prio, r_run_at, r_id) AS c(tenant, fkey, prio, run_at, id)
                  WHERE c.tenant = u_tenant[1] AND c.fkey = u_fkey[1]
                  UNION ALL SELECT NULL, NULL, NULL LIMIT 1) cur
            CROSS JOIN LATERAL gaffer.claim_unit(q, u_tenant[1], u_fkey[1], ks, cur.prio, cur.run_at, cur.id, take) x;
            cand_tenant := NULL;
            cand_fkey := NULL;
            cand_unit := NULL;
            cand_k := NULL;
            unit_more := ARRAY[coalesce(cardinality(cand_id), 0) >= take];
        ELSE
            SELECT * INTO cand_id, cand_kind, cand_tenant, cand_fkey, cand_unit, cand_k, unit_more
            FROM gaffer.claim_take(q, take, ks, u_tenant, u_fkey, u_past, r_tenant, r_fkey, r_prio, r_run_at, r_id) p;
        END IF;
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
            -- nothing. (The gate's figures first, which cost no statement;
            -- the limits themselves only when one of them may apply.)
            limited := false;
            IF lim_any OR cand_kind && lim_kinds THEN
                limited := EXISTS (SELECT 1 FROM gaffer.limits l
                                   WHERE (l.queue IS NULL OR l.queue = q) AND (l.tenant IS NULL OR l.tenant = ANY (coalesce(cand_tenant, u_tenant)))
                                     AND (l.kind IS NULL OR l.kind = ANY (cand_kind)));
            END IF;
            IF limited THEN
                IF cand_tenant IS NULL THEN
                    -- One unit's candidates: its tenant and key, in order.
                    cand_tenant := array_fill(u_tenant[1], ARRAY[cardinality(cand_id)]);
                    cand_fkey := array_fill(u_fkey[1], ARRAY[cardinality(cand_id)]);
                    cand_unit := array_fill(1, ARRAY[cardinality(cand_id)]);
                    cand_k := ARRAY(SELECT coalesce(u_past[1], 0) + generate_series(1, cardinality(cand_id)));
                END IF;
                SELECT * INTO adm FROM gaffer.limit_admit(q, cand_id, cand_tenant, cand_kind, cand_fkey, take, h_name, h_key, h_got, admit_at) a;
                admitted := adm.admitted;
                weighed := adm.considered;
                IF adm.b_name IS NOT NULL THEN
                    admit_at := adm.admitted_at;
                    started_at := admit_at;
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
            IF refused THEN
                -- For claim_jobs' trailer: this claim may leave due jobs a
                -- limit held back (the caller then claims again as soon as
                -- a slot frees, with no cooldown). Until the transaction
                -- ends, which is the claim's.
                PERFORM set_config('gaffer.claim_refused', 'on', true);
            END IF;
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

-- gaffer.claim_take(text, integer, text[], text[], text[], integer[], text[], text[], smallint[], timestamp with time zone[], bigint[]) as 0058_claim_statements left it
CREATE OR REPLACE FUNCTION gaffer.claim_take(q text, take integer, ks text[], u_tenant text[], u_fkey text[], u_past integer[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], OUT cand_id bigint[], OUT cand_kind text[], OUT cand_tenant text[], OUT cand_fkey text[], OUT cand_unit integer[], OUT cand_k integer[], OUT unit_more boolean[])
 RETURNS record
 LANGUAGE plpgsql
AS $function$
BEGIN
    WITH units AS (
        SELECT u.ord::integer AS unit, u.tenant, u.fkey, coalesce(u_past[u.ord], 0) AS past, coalesce(tw.weight, 1) AS weight,
               -- Its share by weight of what the units will have given in
               -- the claim, less what it gave already, and one at least
               -- (claim order decides who goes first).
               greatest(1, ceil((take + sum(coalesce(u_past[u.ord], 0)) OVER ()) * coalesce(tw.weight, 1)::double precision
                                / sum(coalesce(tw.weight, 1)) OVER ()) - coalesce(u_past[u.ord], 0))::integer AS share,
               c.prio, c.run_at, c.id
        FROM unnest(u_tenant, u_fkey) WITH ORDINALITY AS u(tenant, fkey, ord)
        LEFT JOIN gaffer.tenant_weights tw ON tw.tenant = u.tenant
        LEFT JOIN unnest(c_tenant, c_fkey, c_prio, c_run_at, c_id) AS c(tenant, fkey, prio, run_at, id)
            ON c.tenant = u.tenant AND c.fkey = u.fkey
    ), cands AS (
        SELECT x.id, x.kind, un.unit, un.tenant, un.fkey, un.weight, un.share, (un.past + x.k)::integer AS k
        FROM units un
        CROSS JOIN LATERAL gaffer.claim_unit(q, un.tenant, un.fkey, ks, un.prio, un.run_at, un.id, un.share) WITH ORDINALITY AS x(id, kind, k)
    )
    SELECT array_agg(c.id), array_agg(c.kind), array_agg(c.tenant), array_agg(c.fkey), array_agg(c.unit), array_agg(c.k),
           (SELECT array_agg(coalesce(g.n, 0) >= un.share ORDER BY un.unit)
            FROM units un LEFT JOIN (SELECT cands.unit, count(*) AS n FROM cands GROUP BY cands.unit) g ON g.unit = un.unit)
    INTO cand_id, cand_kind, cand_tenant, cand_fkey, cand_unit, cand_k, unit_more
    FROM (SELECT * FROM cands ORDER BY (cands.k - 1) / cands.weight::double precision, cands.unit, cands.k) c;
END
$function$;

-- gaffer.claim_unit(text, text, text, text[], smallint, timestamp with time zone, bigint, integer) as 0035_remote_claims_no_reserved_kinds left it
CREATE OR REPLACE FUNCTION gaffer.claim_unit(q text, t text, k text, ks text[], cp smallint, cr timestamp with time zone, ci bigint, lim integer)
 RETURNS TABLE(id bigint, kind text)
 LANGUAGE plpgsql
AS $function$
BEGIN
    RETURN QUERY
    SELECT j.id, j.kind FROM gaffer.jobs j
    WHERE j.state IN ('pending', 'retrying') AND j.due AND j.queue = q
      AND j.tenant COLLATE "C" = t AND j.fairness_key COLLATE "C" = k AND j.run_at <= now()
      AND (j.priority, j.run_at, j.id) > (coalesce(cp, -1::smallint), coalesce(cr, '-infinity'::timestamptz), coalesce(ci, 0::bigint))
      AND (ks IS NULL OR j.kind = ANY (ks) OR cardinality(ks) = 0 AND NOT starts_with(j.kind, 'gaffer.'))
    ORDER BY j.priority, j.run_at, j.id
    LIMIT lim
    FOR UPDATE SKIP LOCKED;
END
$function$;

-- gaffer.claim_units(text, text, text, text, text, text, integer) as 0031_one_claim left it
CREATE OR REPLACE FUNCTION gaffer.claim_units(q text, lo text, below_t text, below_k text, stop_t text, stop_k text, m integer)
 RETURNS TABLE(tenant text, fairness_key text)
 LANGUAGE sql
 STABLE
AS $function$
    WITH RECURSIVE units AS (
        (SELECT j.tenant, j.fairness_key FROM gaffer.jobs j
         WHERE j.state IN ('pending', 'retrying') AND j.due AND j.queue = q AND j.tenant COLLATE "C" >= lo
           AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") < (below_t, below_k)
           AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") >= (stop_t, stop_k)
         ORDER BY j.tenant COLLATE "C" DESC, j.fairness_key COLLATE "C" DESC LIMIT 1)
        UNION ALL
        SELECT nx.tenant, nx.fairness_key FROM units u CROSS JOIN LATERAL (
            SELECT j.tenant, j.fairness_key FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND j.due AND j.queue = q AND j.tenant COLLATE "C" >= lo
              AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") < (u.tenant, u.fairness_key)
              AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") >= (stop_t, stop_k)
            ORDER BY j.tenant COLLATE "C" DESC, j.fairness_key COLLATE "C" DESC LIMIT 1) nx
    )
    SELECT u.tenant, u.fairness_key FROM units u LIMIT m
$function$;

-- gaffer.jobs.workflow_job_finished as 0005_workflows left it
CREATE TRIGGER workflow_job_finished AFTER UPDATE OF state ON gaffer.jobs FOR EACH ROW WHEN (((new.workflow_run IS NOT NULL) AND (new.state IS DISTINCT FROM old.state) AND (new.state = ANY (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text])))) EXECUTE FUNCTION gaffer.workflow_job_finished();
