-- gaffer:expand
-- The ready set's routines (store/schema/ready.sql, claim.sql) and its
-- first rows, in one transaction: from its commit every claim, of this
-- release and of the one before, reads gaffer.ready, so the jobs
-- claimable then must be in it by then. Written by migrategen from
-- store/schema (the routines below), then finished by hand: the lock
-- first, the fill last. Writes to gaffer.jobs wait while it runs; reads
-- and claims' reads go on until the claim's functions are replaced.
--
-- To change a routine here: edit store/schema, write a new migration.
--
-- What it changes:
--   changed   function gaffer.claim(text, integer, text, boolean, text, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer)
--   new       function gaffer.claim_from_unit(text, text, text, text[], smallint, timestamp with time zone, bigint, integer)
--   new       function gaffer.claim_from_units(text, integer, text[], text[], text[], integer[], text[], text[], smallint[], timestamp with time zone[], bigint[])
--   new       function gaffer.claim_ready(text, integer, text, boolean, text, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer)
--   changed   function gaffer.claim_take(text, integer, text[], text[], text[], integer[], text[], text[], smallint[], timestamp with time zone[], bigint[])
--   changed   function gaffer.claim_unit(text, text, text, text[], smallint, timestamp with time zone, bigint, integer)
--   changed   function gaffer.claim_units(text, text, text, text, text, text, integer)
--   new       function gaffer.job_finishes(text, text)
--   new       function gaffer.job_ready_turns(text, text)
--   new       function gaffer.ready_cleared()
--   new       function gaffer.ready_enter()
--   new       function gaffer.ready_follow()
--   new       function gaffer.ready_gone()
--   new       function gaffer.ready_leave(smallint[], tid[], bigint[])
--   new       function gaffer.ready_rotate(integer, integer)
--   new       trigger gaffer.jobs.ready_cleared
--   new       trigger gaffer.jobs.ready_enter
--   new       trigger gaffer.jobs.ready_follow
--   new       trigger gaffer.jobs.ready_gone
--   changed   trigger gaffer.jobs.workflow_job_finished
SET LOCAL check_function_bodies = off;
LOCK TABLE gaffer.jobs IN SHARE ROW EXCLUSIVE MODE;

DROP TRIGGER workflow_job_finished ON gaffer.jobs;

-- changed: gaffer.claim(text, integer, text, boolean, text, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim(q text, n integer, claimer text, worker boolean, t text, ks text[], s_tenant text[], s_fkey text[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], after_tenant text, after_fkey text, k_tenant text[], k_fkey text[], grace_ms integer, OUT ids bigint[], OUT next_tenant text, OUT next_fkey text, OUT started_at timestamp with time zone, OUT busy boolean)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
BEGIN
    SELECT c.ids, c.next_tenant, c.next_fkey, c.started_at, c.busy INTO ids, next_tenant, next_fkey, started_at, busy
    FROM gaffer.claim_ready(q, n, claimer, worker, t, ks, s_tenant, s_fkey, c_tenant, c_fkey, c_prio, c_run_at, c_id,
                            after_tenant, after_fkey, k_tenant, k_fkey, grace_ms) c;
    PERFORM set_config('gaffer.claim_leaves_ready', 'off', true);
END
$function$;

-- new: gaffer.claim_from_unit(text, text, text, text[], smallint, timestamp with time zone, bigint, integer), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_from_unit(q text, t text, k text, ks text[], cp smallint, cr timestamp with time zone, ci bigint, lim integer)
 RETURNS TABLE(id bigint, kind text, slot smallint, at tid)
 LANGUAGE plpgsql
AS $function$
DECLARE
    was text[] := ARRAY[current_setting('enable_seqscan'), current_setting('enable_hashjoin'), current_setting('enable_mergejoin'),
                        current_setting('enable_sort')];
BEGIN
    -- (set_config, not a SET clause on the function: a function with one
    -- costs milliseconds a call)
    PERFORM set_config('enable_seqscan', 'off', true), set_config('enable_hashjoin', 'off', true),
            set_config('enable_mergejoin', 'off', true), set_config('enable_sort', 'off', true);
    -- The unit's ready rows in order, each job's row locked as it comes
    -- (the LIMIT outside: a row passed over or found not claimable does
    -- not count), then held to what its job is once locked. Each job's
    -- row is read by its id only, and the plan is made of ordered index
    -- scans and nested loops only: the slots' statistics never say how
    -- many rows they hold, and the jobs' may be as old as the table.
    RETURN QUERY
    SELECT x.id, x.kind, x.slot, x.at
    FROM (SELECT r.id, r.kind, r.slot, r.ctid AS at, j.state, j.due, j.queue
          FROM gaffer.ready r JOIN gaffer.jobs j ON j.id = r.id
          WHERE r.queue = q AND r.tenant COLLATE "C" = t AND r.fairness_key COLLATE "C" = k AND r.run_at <= now()
            AND (r.priority, r.run_at, r.id) > (coalesce(cp, -1::smallint), coalesce(cr, '-infinity'::timestamptz), coalesce(ci, 0::bigint))
            AND (ks IS NULL OR r.kind = ANY (ks) OR cardinality(ks) = 0 AND NOT starts_with(r.kind, 'gaffer.'))
          ORDER BY r.priority, r.run_at, r.id
          OFFSET 0 -- (keeps the conditions below out of this scan of the jobs)
          FOR UPDATE OF j SKIP LOCKED) x
    WHERE x.state IN ('pending', 'retrying') AND x.due AND x.queue = q
    LIMIT lim;
    PERFORM set_config('enable_seqscan', was[1], true), set_config('enable_hashjoin', was[2], true),
            set_config('enable_mergejoin', was[3], true), set_config('enable_sort', was[4], true);
END
$function$;

-- new: gaffer.claim_from_units(text, integer, text[], text[], text[], integer[], text[], text[], smallint[], timestamp with time zone[], bigint[]), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_from_units(q text, take integer, ks text[], u_tenant text[], u_fkey text[], u_past integer[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], OUT cand_id bigint[], OUT cand_kind text[], OUT cand_tenant text[], OUT cand_fkey text[], OUT cand_unit integer[], OUT cand_k integer[], OUT unit_more boolean[], OUT cand_slot smallint[], OUT cand_at tid[])
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
        SELECT x.id, x.kind, x.slot, x.at, un.unit, un.tenant, un.fkey, un.weight, un.share, (un.past + x.k)::integer AS k
        FROM units un
        CROSS JOIN LATERAL gaffer.claim_from_unit(q, un.tenant, un.fkey, ks, un.prio, un.run_at, un.id, un.share) WITH ORDINALITY AS x(id, kind, slot, at, k)
    )
    SELECT array_agg(c.id), array_agg(c.kind), array_agg(c.tenant), array_agg(c.fkey), array_agg(c.unit), array_agg(c.k),
           (SELECT array_agg(coalesce(g.n, 0) >= un.share ORDER BY un.unit)
            FROM units un LEFT JOIN (SELECT cands.unit, count(*) AS n FROM cands GROUP BY cands.unit) g ON g.unit = un.unit),
           array_agg(c.slot), array_agg(c.at)
    INTO cand_id, cand_kind, cand_tenant, cand_fkey, cand_unit, cand_k, unit_more, cand_slot, cand_at
    FROM (SELECT * FROM cands ORDER BY (cands.k - 1) / cands.weight::double precision, cands.unit, cands.k) c;
END
$function$;

-- new: gaffer.claim_ready(text, integer, text, boolean, text, text[], text[], text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_ready(q text, n integer, claimer text, worker boolean, t text, ks text[], s_tenant text[], s_fkey text[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], after_tenant text, after_fkey text, k_tenant text[], k_fkey text[], grace_ms integer, OUT ids bigint[], OUT next_tenant text, OUT next_fkey text, OUT started_at timestamp with time zone, OUT busy boolean, OUT took_slot smallint[], OUT took_at tid[])
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
    cand_slot smallint[];
    cand_at tid[];
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
    sort_was text;
BEGIN
    next_tenant := after_tenant;
    next_fkey := after_fkey;
    started_at := now();
    busy := false;
    took_slot := '{}';
    took_at := '{}';
    -- The statement that starts the jobs deletes their ready rows (from
    -- took_*): the trigger need not (ready.sql: job_ready_turns).
    PERFORM set_config('gaffer.claim_leaves_ready', 'on', true);
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
    sort_was := current_setting('enable_sort');
    PERFORM set_config('enable_sort', 'off', true);

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
                               ELSE (SELECT j.id FROM gaffer.ready j
                                     WHERE j.queue = q
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
            SELECT array_agg(x.id), array_agg(x.kind), array_agg(x.slot), array_agg(x.at) INTO cand_id, cand_kind, cand_slot, cand_at
            FROM (SELECT c.prio, c.run_at, c.id FROM unnest(r_tenant, r_fkey, r_prio, r_run_at, r_id) AS c(tenant, fkey, prio, run_at, id)
                  WHERE c.tenant = u_tenant[1] AND c.fkey = u_fkey[1]
                  UNION ALL SELECT NULL, NULL, NULL LIMIT 1) cur
            CROSS JOIN LATERAL gaffer.claim_from_unit(q, u_tenant[1], u_fkey[1], ks, cur.prio, cur.run_at, cur.id, take) x;
            cand_tenant := NULL;
            cand_fkey := NULL;
            cand_unit := NULL;
            cand_k := NULL;
            unit_more := ARRAY[coalesce(cardinality(cand_id), 0) >= take];
        ELSE
            SELECT * INTO cand_id, cand_kind, cand_tenant, cand_fkey, cand_unit, cand_k, unit_more, cand_slot, cand_at
            FROM gaffer.claim_from_units(q, take, ks, u_tenant, u_fkey, u_past, r_tenant, r_fkey, r_prio, r_run_at, r_id) p;
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
            IF limited THEN
                SELECT took_slot || coalesce(array_agg(c.s), '{}'), took_at || coalesce(array_agg(c.a), '{}') INTO took_slot, took_at
                FROM unnest(cand_id, cand_slot, cand_at) AS c(i, s, a) WHERE c.i = ANY (admitted);
            ELSE
                took_slot := took_slot || cand_slot[1:take];
                took_at := took_at || cand_at[1:take];
            END IF;
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
    PERFORM set_config('enable_sort', sort_was, true);
END
$function$;

-- changed: gaffer.claim_take(text, integer, text[], text[], text[], integer[], text[], text[], smallint[], timestamp with time zone[], bigint[]), as store/schema/retired.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_take(q text, take integer, ks text[], u_tenant text[], u_fkey text[], u_past integer[], c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamp with time zone[], c_id bigint[], OUT cand_id bigint[], OUT cand_kind text[], OUT cand_tenant text[], OUT cand_fkey text[], OUT cand_unit integer[], OUT cand_k integer[], OUT unit_more boolean[])
 RETURNS record
 LANGUAGE sql
AS $function$
    SELECT NULL::bigint[], NULL::text[], NULL::text[], NULL::text[], NULL::integer[], NULL::integer[], NULL::boolean[]
$function$;

-- changed: gaffer.claim_unit(text, text, text, text[], smallint, timestamp with time zone, bigint, integer), as store/schema/retired.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_unit(q text, t text, k text, ks text[], cp smallint, cr timestamp with time zone, ci bigint, lim integer)
 RETURNS TABLE(id bigint, kind text)
 LANGUAGE sql
AS $function$
    SELECT NULL::bigint, NULL::text WHERE false
$function$;

-- changed: gaffer.claim_units(text, text, text, text, text, text, integer), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_units(q text, lo text, below_t text, below_k text, stop_t text, stop_k text, m integer)
 RETURNS TABLE(tenant text, fairness_key text)
 LANGUAGE sql
 STABLE
AS $function$
    WITH RECURSIVE units AS (
        (SELECT j.tenant, j.fairness_key FROM gaffer.ready j
         WHERE j.queue = q AND j.tenant COLLATE "C" >= lo
           AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") < (below_t, below_k)
           AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") >= (stop_t, stop_k)
         ORDER BY j.tenant COLLATE "C" DESC, j.fairness_key COLLATE "C" DESC LIMIT 1)
        UNION ALL
        SELECT nx.tenant, nx.fairness_key FROM units u CROSS JOIN LATERAL (
            SELECT j.tenant, j.fairness_key FROM gaffer.ready j
            WHERE j.queue = q AND j.tenant COLLATE "C" >= lo
              AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") < (u.tenant, u.fairness_key)
              AND (j.tenant COLLATE "C", j.fairness_key COLLATE "C") >= (stop_t, stop_k)
            ORDER BY j.tenant COLLATE "C" DESC, j.fairness_key COLLATE "C" DESC LIMIT 1) nx
    )
    SELECT u.tenant, u.fairness_key FROM units u LIMIT m
$function$;

-- new: gaffer.job_finishes(text, text), as store/schema/workflow.sql has it
CREATE OR REPLACE FUNCTION gaffer.job_finishes(old_state text, new_state text)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
BEGIN
    RETURN new_state IS DISTINCT FROM old_state AND new_state IN ('completed', 'failed', 'cancelled');
END
$function$;

-- new: gaffer.job_ready_turns(text, text), as store/schema/ready.sql has it
CREATE OR REPLACE FUNCTION gaffer.job_ready_turns(old_state text, new_state text)
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
    SELECT (new_state <> 'running' OR current_setting('gaffer.claim_leaves_ready', true) IS DISTINCT FROM 'on')
           AND (old_state IN ('pending', 'retrying') OR new_state IN ('pending', 'retrying'))
$function$;

-- new: gaffer.ready_cleared(), as store/schema/ready.sql has it
CREATE OR REPLACE FUNCTION gaffer.ready_cleared()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    TRUNCATE gaffer.ready;
    RETURN NULL;
END
$function$;

-- new: gaffer.ready_enter(), as store/schema/ready.sql has it
CREATE OR REPLACE FUNCTION gaffer.ready_enter()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO gaffer.ready (slot, queue, tenant, fairness_key, priority, run_at, id, kind)
    SELECT (SELECT g.cur FROM gaffer.ready_ring g), n.queue, n.tenant, n.fairness_key, n.priority, n.run_at, n.id, n.kind
    FROM entered n
    WHERE n.state IN ('pending', 'retrying') AND n.due;
    RETURN NULL;
END
$function$;

-- new: gaffer.ready_follow(), as store/schema/ready.sql has it
CREATE OR REPLACE FUNCTION gaffer.ready_follow()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    was_ready boolean := OLD.state IN ('pending', 'retrying') AND OLD.due;
    now_ready boolean := NEW.state IN ('pending', 'retrying') AND NEW.due;
BEGIN
    IF was_ready AND now_ready AND (OLD.queue, OLD.tenant, OLD.fairness_key, OLD.priority, OLD.run_at, OLD.kind)
                      IS NOT DISTINCT FROM (NEW.queue, NEW.tenant, NEW.fairness_key, NEW.priority, NEW.run_at, NEW.kind) THEN
        RETURN NULL;
    END IF;
    IF was_ready THEN
        DELETE FROM gaffer.ready r
        WHERE r.queue = OLD.queue AND r.tenant COLLATE "C" = OLD.tenant AND r.fairness_key COLLATE "C" = OLD.fairness_key
          AND r.priority = OLD.priority AND r.run_at = OLD.run_at AND r.id = OLD.id;
    END IF;
    IF now_ready THEN
        INSERT INTO gaffer.ready (slot, queue, tenant, fairness_key, priority, run_at, id, kind)
        VALUES ((SELECT g.cur FROM gaffer.ready_ring g), NEW.queue, NEW.tenant, NEW.fairness_key, NEW.priority, NEW.run_at, NEW.id, NEW.kind);
    END IF;
    RETURN NULL;
END
$function$;

-- new: gaffer.ready_gone(), as store/schema/ready.sql has it
CREATE OR REPLACE FUNCTION gaffer.ready_gone()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    DELETE FROM gaffer.ready r
    WHERE r.queue = OLD.queue AND r.tenant COLLATE "C" = OLD.tenant AND r.fairness_key COLLATE "C" = OLD.fairness_key
      AND r.priority = OLD.priority AND r.run_at = OLD.run_at AND r.id = OLD.id;
    RETURN NULL;
END
$function$;

-- new: gaffer.ready_leave(smallint[], tid[], bigint[]), as store/schema/ready.sql has it
CREATE OR REPLACE FUNCTION gaffer.ready_leave(slots smallint[], ats tid[], ids bigint[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    a0 tid[];
    a1 tid[];
    a2 tid[];
    was text := current_setting('enable_seqscan');
    n integer;
    gone integer := 0;
BEGIN
    PERFORM set_config('enable_seqscan', 'off', true);
    SELECT array_agg(x.a) FILTER (WHERE x.s = 0), array_agg(x.a) FILTER (WHERE x.s = 1), array_agg(x.a) FILTER (WHERE x.s = 2)
    INTO a0, a1, a2
    FROM unnest(slots, ats) AS x(s, a);
    IF a0 IS NOT NULL THEN
        DELETE FROM gaffer.ready_0 r WHERE r.ctid = ANY (a0) AND r.id = ANY (ids);
        GET DIAGNOSTICS n = ROW_COUNT;
        gone := gone + n;
    END IF;
    IF a1 IS NOT NULL THEN
        DELETE FROM gaffer.ready_1 r WHERE r.ctid = ANY (a1) AND r.id = ANY (ids);
        GET DIAGNOSTICS n = ROW_COUNT;
        gone := gone + n;
    END IF;
    IF a2 IS NOT NULL THEN
        DELETE FROM gaffer.ready_2 r WHERE r.ctid = ANY (a2) AND r.id = ANY (ids);
        GET DIAGNOSTICS n = ROW_COUNT;
        gone := gone + n;
    END IF;
    IF gone < coalesce(cardinality(ids), 0) THEN
        -- A job started whose row was not where the claim read it: a
        -- change committed between the claim's read and its lock moved it
        -- (deleted and inserted it again). Its row goes by id.
        DELETE FROM gaffer.ready r WHERE r.id = ANY (ids);
    END IF;
    PERFORM set_config('enable_seqscan', was, true);
END
$function$;

-- new: gaffer.ready_rotate(integer, integer), as store/schema/ready.sql has it
CREATE OR REPLACE FUNCTION gaffer.ready_rotate(move_max integer, wait_ms integer, OUT turned boolean, OUT moved integer, OUT why text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
DECLARE
    c smallint;
    old smallint;
    n integer;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        -- Its count and move must see what committed while it waited for
        -- the lock: a statement's own snapshot, taken after it.
        RAISE EXCEPTION 'gaffer.ready_rotate needs a READ COMMITTED transaction, not %', current_setting('transaction_isolation');
    END IF;
    turned := false;
    moved := 0;
    SELECT g.cur INTO c FROM gaffer.ready_ring g FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        why := 'busy';
        RETURN;
    END IF;
    old := (c + 1) % 3;
    -- (for the move below; this transaction is the turn's own)
    PERFORM set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true);
    PERFORM set_config('lock_timeout', greatest(wait_ms, 1)::text || 'ms', true);
    BEGIN
        EXECUTE format('LOCK TABLE gaffer.ready_%s IN ACCESS EXCLUSIVE MODE', old);
    EXCEPTION WHEN lock_not_available THEN
        why := 'locked';
        RETURN;
    END;
    PERFORM set_config('lock_timeout', '0', true);
    EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM gaffer.ready_%s LIMIT $1) x', old) INTO n USING move_max + 1;
    IF n > move_max THEN
        why := 'full';
        RETURN;
    END IF;
    IF n > 0 THEN
        EXECUTE format('INSERT INTO gaffer.ready (slot, queue, tenant, fairness_key, priority, run_at, id, kind)
                        SELECT DISTINCT ON (j.id) $1, j.queue, j.tenant, j.fairness_key, j.priority, j.run_at, j.id, j.kind
                        FROM gaffer.ready_%s r
                        CROSS JOIN LATERAL (SELECT * FROM gaffer.jobs s WHERE s.id = r.id LIMIT 1) j
                        WHERE j.state IN (''pending'', ''retrying'') AND j.due
                        ORDER BY j.id', old) USING c;
        GET DIAGNOSTICS moved = ROW_COUNT;
    END IF;
    EXECUTE format('TRUNCATE gaffer.ready_%s', old);
    UPDATE gaffer.ready_ring SET cur = old, turned_at = now();
    turned := true;
END
$function$;

-- new: gaffer.jobs.ready_cleared, as store/schema/ready.sql has it
CREATE TRIGGER ready_cleared AFTER TRUNCATE ON gaffer.jobs FOR EACH STATEMENT EXECUTE FUNCTION gaffer.ready_cleared();

-- new: gaffer.jobs.ready_enter, as store/schema/ready.sql has it
CREATE TRIGGER ready_enter AFTER INSERT ON gaffer.jobs REFERENCING NEW TABLE AS entered FOR EACH STATEMENT EXECUTE FUNCTION gaffer.ready_enter();

-- new: gaffer.jobs.ready_follow, as store/schema/ready.sql has it
CREATE TRIGGER ready_follow AFTER UPDATE ON gaffer.jobs FOR EACH ROW WHEN (gaffer.job_ready_turns(old.state, new.state)) EXECUTE FUNCTION gaffer.ready_follow();

-- new: gaffer.jobs.ready_gone, as store/schema/ready.sql has it
CREATE TRIGGER ready_gone AFTER DELETE ON gaffer.jobs FOR EACH ROW WHEN (((old.state = ANY (ARRAY['pending'::text, 'retrying'::text])) AND old.due)) EXECUTE FUNCTION gaffer.ready_gone();

-- changed: gaffer.jobs.workflow_job_finished, as store/schema/workflow.sql has it
CREATE TRIGGER workflow_job_finished AFTER UPDATE OF state ON gaffer.jobs FOR EACH ROW WHEN (((new.workflow_run IS NOT NULL) AND gaffer.job_finishes(old.state, new.state))) EXECUTE FUNCTION gaffer.workflow_job_finished();

-- The jobs claimable now. (No other transaction writes gaffer.jobs
-- until this one commits: the lock above.)
INSERT INTO gaffer.ready (slot, queue, tenant, fairness_key, priority, run_at, id, kind)
SELECT (SELECT g.cur FROM gaffer.ready_ring g), j.queue, j.tenant, j.fairness_key, j.priority, j.run_at, j.id, j.kind
FROM gaffer.jobs j
WHERE j.state IN ('pending', 'retrying') AND j.due;
