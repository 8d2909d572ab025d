-- gaffer:generated
-- gaffer:expand
-- The routines of store/schema that differ from those 0030_due_jobs left,
-- written by `go run ./store/internal/migrategen`. Edit store/schema, not
-- this file, and write it again (-replace) while no release carries it.
--
--   new       function gaffer.claim(text, integer, text, boolean, text, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer)
--   changed   function gaffer.claim_pick(text, integer, text, text[], text[], smallint[], timestamp with time zone[], bigint[], text, text)
--   changed   function gaffer.claim_pick(text, integer, text, text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer)
--   changed   function gaffer.claim_pick_remote(text, integer, text, text, text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text)
--   changed   function gaffer.claim_pick_units(text, integer, text, text[], text[])
--   new       function gaffer.claim_promote(text)
--   new       function gaffer.claim_take(text, integer, text[], text[], text[], integer[], text[], text[], smallint[], timestamp with time zone[], bigint[])
--   new       function gaffer.claim_unit(text, text, text, text[], smallint, timestamp with time zone, bigint, integer)
--   new       function gaffer.claim_units(text, text, text, text, text, text, integer)
--   changed   function gaffer.fair_take(text, integer, text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[])
--   changed   function gaffer.fair_take_kinds(text, integer, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[])
--   changed   function gaffer.fair_units(text, integer, text, text, text)
--   changed   function gaffer.limit_admit(text, bigint[], text[], text[], text[])
--   new       function gaffer.limit_admit(text, bigint[], text[], text[], text[], integer, text[], text[], integer[])
--   changed   function gaffer.limit_admit(text, gaffer.jobs[])
--   new       function gaffer.limit_bucket_key(text)
--   changed   function gaffer.limit_changed()
--   changed   function gaffer.limit_key(text, gaffer.jobs)
--   changed   function gaffer.limit_key_of(text, text, text, text, text, text, json)
--   new       function gaffer.limits_changing()
--   new       function gaffer.limits_hold()
--   new       function gaffer.limits_lock_id()
--   changed   function gaffer.queue_units(text, integer)
--   changed   function gaffer.tenant_units(text, text, integer, text)
--   new       function gaffer.url_host(text)
--   changed   function gaffer.workflow_start_ready(bigint)
--   changed   function gaffer.workflow_step_replayed()
--   new       trigger gaffer.limit_buckets.limit_buckets_serialized
--   new       trigger gaffer.limits.limits_serialized
SET LOCAL check_function_bodies = off;

-- new: gaffer.claim(text, integer, text, boolean, text, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer), as store/schema/claim.sql has it
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
                       coalesce(array_agg(x.prio ORDER BY x.unit), '{}'), coalesce(array_agg(x.run_at ORDER BY x.unit), '{}'),
                       coalesce(array_agg(x.id ORDER BY x.unit), '{}'), coalesce(array_agg(x.k ORDER BY x.unit), '{}')
                INTO d_tenant, d_fkey, d_prio, d_run_at, d_id, d_k
                FROM (SELECT DISTINCT ON (c.unit) c.unit, c.tenant, c.fkey, j.priority AS prio, j.run_at, c.id, c.k
                      FROM unnest(cand_id, cand_tenant, cand_fkey, cand_unit, cand_k) AS c(id, tenant, fkey, unit, k)
                      JOIN gaffer.jobs j ON j.id = c.id
                      WHERE unit_more[c.unit]
                        AND c.unit NOT IN (SELECT r.unit FROM unnest(cand_unit) WITH ORDINALITY AS r(unit, i) WHERE r.i > weighed)
                      ORDER BY c.unit, c.k DESC) x;
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

-- changed: gaffer.claim_pick(text, integer, text, text[], text[], smallint[], timestamp with time zone[], bigint[], text, text), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_pick(q text, n integer, node_id text, c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], after_tenant text, after_fkey text)
 RETURNS bigint[]
 LANGUAGE sql
AS $function$
    SELECT gaffer.claim_pick(q, n, node_id, c_tenant, c_fkey, c_prio, c_run_at, c_id, after_tenant, after_fkey, '{}', '{}', 0)
$function$;

-- changed: gaffer.claim_pick(text, integer, text, text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_pick(q text, n integer, node_id text, c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], after_tenant text, after_fkey text, k_tenant text[], k_fkey text[], grace_ms integer)
 RETURNS bigint[]
 LANGUAGE plpgsql
AS $function$
DECLARE
    ids bigint[];
BEGIN
    SELECT c.ids INTO ids FROM gaffer.claim(q, n, node_id, false, NULL, NULL, NULL, NULL, c_tenant, c_fkey, c_prio, c_run_at, c_id,
                                            after_tenant, after_fkey, k_tenant, k_fkey, grace_ms) c;
    PERFORM gaffer.claim_promote(q);
    RETURN ids;
END
$function$;

-- changed: gaffer.claim_pick_remote(text, integer, text, text, text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_pick_remote(q text, n integer, worker_id text, t text, ks text[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], after_tenant text, after_fkey text)
 RETURNS bigint[]
 LANGUAGE plpgsql
AS $function$
DECLARE
    ids bigint[];
BEGIN
    SELECT c.ids INTO ids FROM gaffer.claim(q, n, worker_id, true, t, ks, NULL, NULL, c_tenant, c_fkey, c_prio, c_run_at, c_id,
                                            after_tenant, after_fkey, '{}', '{}', 0) c;
    PERFORM gaffer.claim_promote(q);
    RETURN ids;
END
$function$;

-- changed: gaffer.claim_pick_units(text, integer, text, text[], text[]), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_pick_units(q text, n integer, node_id text, u_tenant text[], u_fkey text[])
 RETURNS bigint[]
 LANGUAGE plpgsql
AS $function$
DECLARE
    ids bigint[];
BEGIN
    IF coalesce(cardinality(u_tenant), 0) = 0 OR cardinality(u_tenant) <> coalesce(cardinality(u_fkey), 0) THEN
        RETURN NULL;
    END IF;
    SELECT c.ids INTO ids FROM gaffer.claim(q, n, node_id, false, NULL, NULL, u_tenant, u_fkey, '{}', '{}', '{}', '{}', '{}',
                                            NULL, NULL, '{}', '{}', 0) c;
    PERFORM gaffer.claim_promote(q);
    RETURN ids;
END
$function$;

-- new: gaffer.claim_promote(text), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_promote(q text)
 RETURNS integer
 LANGUAGE plpgsql
AS $function$
DECLARE
    n integer;
BEGIN
    UPDATE gaffer.jobs j SET due = true
    WHERE j.id IN (SELECT s.id FROM gaffer.jobs s
                   WHERE s.state IN ('pending', 'retrying') AND NOT s.due AND s.queue = q AND s.run_at <= now()
                   ORDER BY s.run_at
                   LIMIT 1000
                   FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM pg_notify('gaffer_jobs', q);
    END IF;
    RETURN n;
END
$function$;

-- new: gaffer.claim_take(text, integer, text[], text[], text[], integer[], text[], text[], smallint[], timestamp with time zone[], bigint[]), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_take(q text, take integer, ks text[], u_tenant text[], u_fkey text[], u_past integer[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], OUT cand_id bigint[], OUT cand_kind text[], OUT cand_tenant text[], OUT cand_fkey text[], OUT cand_unit integer[], OUT cand_k integer[], OUT unit_more boolean[])
 RETURNS record
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF cardinality(u_tenant) = 1 THEN
        SELECT array_agg(x.id), array_agg(x.kind) INTO cand_id, cand_kind
        FROM (SELECT c.prio, c.run_at, c.id FROM unnest(c_tenant, c_fkey, c_prio, c_run_at, c_id) AS c(tenant, fkey, prio, run_at, id)
              WHERE c.tenant = u_tenant[1] AND c.fkey = u_fkey[1]
              UNION ALL SELECT NULL, NULL, NULL LIMIT 1) cur
        CROSS JOIN LATERAL gaffer.claim_unit(q, u_tenant[1], u_fkey[1], ks, cur.prio, cur.run_at, cur.id, take) x;
        unit_more := ARRAY[coalesce(cardinality(cand_id), 0) >= take];
        RETURN;
    END IF;
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

-- new: gaffer.claim_unit(text, text, text, text[], smallint, timestamp with time zone, bigint, integer), as store/schema/claim.sql has it
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
      AND (ks IS NULL OR j.kind = ANY (ks))
    ORDER BY j.priority, j.run_at, j.id
    LIMIT lim
    FOR UPDATE SKIP LOCKED;
END
$function$;

-- new: gaffer.claim_units(text, text, text, text, text, text, integer), as store/schema/claim.sql has it
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

-- changed: gaffer.fair_take(text, integer, text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[]), as store/schema/retired.sql has it
CREATE OR REPLACE FUNCTION gaffer.fair_take(q text, take integer, u_tenant text[], u_fkey text[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[])
 RETURNS TABLE(id bigint, kind text, tenant text)
 LANGUAGE sql
AS $function$
    SELECT NULL::bigint, NULL::text, NULL::text WHERE false
$function$;

-- changed: gaffer.fair_take_kinds(text, integer, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[]), as store/schema/retired.sql has it
CREATE OR REPLACE FUNCTION gaffer.fair_take_kinds(q text, take integer, ks text[], u_tenant text[], u_fkey text[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[])
 RETURNS TABLE(id bigint, kind text, tenant text)
 LANGUAGE sql
AS $function$
    SELECT NULL::bigint, NULL::text, NULL::text WHERE false
$function$;

-- changed: gaffer.fair_units(text, integer, text, text, text), as store/schema/retired.sql has it
CREATE OR REPLACE FUNCTION gaffer.fair_units(q text, n integer, node_id text, after_tenant text, after_fkey text, OUT u_tenant text[], OUT u_fkey text[])
 RETURNS record
 LANGUAGE sql
AS $function$
    SELECT NULL::text[], NULL::text[]
$function$;

-- changed: gaffer.limit_admit(text, bigint[], text[], text[], text[]), as store/schema/retired.sql has it
CREATE OR REPLACE FUNCTION gaffer.limit_admit(q text, c_id bigint[], c_tenant text[], c_kind text[], c_fkey text[])
 RETURNS bigint[]
 LANGUAGE sql
AS $function$
    SELECT '{}'::bigint[]
$function$;

-- new: gaffer.limit_admit(text, bigint[], text[], text[], text[], integer, text[], text[], integer[]), as store/schema/limits.sql has it
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

-- changed: gaffer.limit_admit(text, gaffer.jobs[]), as store/schema/retired.sql has it
CREATE OR REPLACE FUNCTION gaffer.limit_admit(q text, cands gaffer.jobs[])
 RETURNS bigint[]
 LANGUAGE sql
AS $function$
    SELECT '{}'::bigint[]
$function$;

-- new: gaffer.limit_bucket_key(text), as store/schema/limits.sql has it
CREATE OR REPLACE FUNCTION gaffer.limit_bucket_key(raw text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT CASE WHEN octet_length(raw) <= 200 THEN raw
                ELSE left(raw, 64) || '…' || encode(sha256(convert_to(raw, 'UTF8')), 'hex') END
$function$;

-- changed: gaffer.limit_changed(), as store/schema/limits.sql has it
CREATE OR REPLACE FUNCTION gaffer.limit_changed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    UPDATE gaffer.limit_buckets SET running_bound = NULL
    WHERE limit_name = OLD.name AND running_bound IS NOT NULL;
    RETURN NULL;
END
$function$;

-- changed: gaffer.limit_key(text, gaffer.jobs), as store/schema/limits.sql has it
CREATE OR REPLACE FUNCTION gaffer.limit_key(key_from text, j gaffer.jobs)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT gaffer.limit_key_of(key_from, j.tenant, j.kind, j.queue, j.limit_key, j.fairness_key, j.args)
$function$;

-- changed: gaffer.limit_key_of(text, text, text, text, text, text, json), as store/schema/limits.sql has it
CREATE OR REPLACE FUNCTION gaffer.limit_key_of(key_from text, tenant text, kind text, queue text, limit_key text, fairness_key text, args json)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT gaffer.limit_bucket_key(coalesce(CASE
        WHEN key_from = '' THEN ''
        WHEN key_from = 'tenant' THEN tenant
        WHEN key_from = 'kind' THEN kind
        WHEN key_from = 'queue' THEN queue
        WHEN key_from = 'limit_key' THEN limit_key
        WHEN key_from = 'fairness_key' THEN fairness_key
        WHEN key_from LIKE 'args.%' THEN args #>> string_to_array(substr(key_from, 6), '.')
        WHEN key_from LIKE 'host(args.%)' THEN
            gaffer.url_host(args #>> string_to_array(substr(key_from, 11, length(key_from) - 11), '.'))
    END, ''))
$function$;

-- new: gaffer.limits_changing(), as store/schema/limits.sql has it
CREATE OR REPLACE FUNCTION gaffer.limits_changing()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    PERFORM pg_advisory_xact_lock(gaffer.limits_lock_id());
    RETURN NULL;
END
$function$;

-- new: gaffer.limits_hold(), as store/schema/limits.sql has it
CREATE OR REPLACE FUNCTION gaffer.limits_hold()
 RETURNS boolean
 LANGUAGE sql
AS $function$ SELECT pg_try_advisory_xact_lock_shared(gaffer.limits_lock_id()) $function$;

-- new: gaffer.limits_lock_id(), as store/schema/limits.sql has it
CREATE OR REPLACE FUNCTION gaffer.limits_lock_id()
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ SELECT 7449347848622178306::bigint $function$;

-- changed: gaffer.queue_units(text, integer), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.queue_units(q text, n integer)
 RETURNS TABLE(tenant text, fairness_key text)
 LANGUAGE sql
 STABLE
AS $function$
    SELECT u.tenant, u.fairness_key FROM gaffer.claim_units(q, '', chr(1114111), '', '', '', n) u
$function$;

-- changed: gaffer.tenant_units(text, text, integer, text), as store/schema/retired.sql has it
CREATE OR REPLACE FUNCTION gaffer.tenant_units(q text, t text, n integer, after_fkey text)
 RETURNS text[]
 LANGUAGE sql
AS $function$
    SELECT '{}'::text[]
$function$;

-- new: gaffer.url_host(text), as store/schema/limits.sql has it
CREATE OR REPLACE FUNCTION gaffer.url_host(u text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
    SELECT translate(coalesce(m[1], m[2]), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')
    FROM (SELECT regexp_match(u, '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#]*@)?(?:\[([^]/?#]*)\]|([^:/?#]*))')) x(m)
$function$;

-- changed: gaffer.workflow_start_ready(bigint), as store/schema/workflow.sql has it
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
        INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, args, run_at, due, workflow_run, step, inputs)
        VALUES (r.tenant, st.kind, st.queue, st.priority, st.max_attempts, st.timeout_ms, st.args,
                now() + st.wait_ms * interval '1 millisecond', st.wait_ms <= 0, p_run, st.name,
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

-- changed: gaffer.workflow_step_replayed(), as store/schema/workflow.sql has it
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
    NEW.due := s.wait_ms <= 0;
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

-- new: gaffer.limit_buckets.limit_buckets_serialized, as store/schema/limits.sql has it
CREATE TRIGGER limit_buckets_serialized BEFORE DELETE OR TRUNCATE ON gaffer.limit_buckets FOR EACH STATEMENT EXECUTE FUNCTION gaffer.limits_changing();

-- new: gaffer.limits.limits_serialized, as store/schema/limits.sql has it
CREATE TRIGGER limits_serialized BEFORE INSERT OR DELETE OR UPDATE OR TRUNCATE ON gaffer.limits FOR EACH STATEMENT EXECUTE FUNCTION gaffer.limits_changing();
