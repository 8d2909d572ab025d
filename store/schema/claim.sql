-- The claim: which due jobs a node or a remote worker starts next (G10,
-- G12). One text for every claim path — a node's claim of a queue, its
-- side claim of a few units, a remote worker's claim — in
-- gaffer.claim_ready; the statement that starts the picked jobs, and
-- deletes their rows from the ready set the claim reads (ready.sql), is
-- store/queries/jobs.sql's claim_jobs (store.Claim). Limits are decided
-- by gaffer.limit_admit (limits.sql). The routines here, top down:
--   claim_ready    the claim: the gate, then rounds, then where the next
--                  claim starts, and where the picked jobs' ready rows are
--   claim_units    the next units with due jobs, in rotation order
--   claim_from_units a round's candidates from its units (two or more), in
--                  claim order
--   claim_from_unit one unit's part: its first due jobs past a position
--   claim_promote  scheduled jobs whose time came made due (run first,
--                  in the claim's transaction)
--   claim, claim_pick, claim_pick_units, claim_pick_remote, queue_units:
--                  the signatures of earlier builds, for a rolling upgrade
--   claim_older_build  what of those claims an earlier build can start
--
-- How a claim of n jobs goes:
--   1. the gate: nothing for a paused queue, a draining node, or a remote
--      worker that is draining, gone or unknown; nothing either while a
--      limit is being changed (the limits lock, limits.sql: busy);
--   2. rounds: each takes candidates from the units to look deeper into
--      (d_*: units that may have more than they gave, past what they
--      gave) and from the next units found in rotation order
--      (claim_units); the limits admit them in claim order
--      (limit_admit); the claim goes on until it has n jobs, every unit
--      had its turn, or it looked at max_units units or weighed
--      max_weighed candidates;
--   3. it returns the jobs and where the caller's next claim starts.
--
-- Variables, by prefix: s_* a side claim's units; c_* the caller's
-- cursors; after_* where the caller's last claim stopped; k_* the units
-- the caller's last claim served (grace); f_* units found this round;
-- u_* this round's units (u_past: what each gave in earlier rounds); r_*
-- this round's cursors; d_* units to look deeper into; cand_* this
-- round's candidates; h_* what the claim admitted so far, per limit
-- bucket; next_* where the next claim starts; m how many units to find;
-- take how many jobs the claim still wants.
--
-- Glossary:
--   unit       a (tenant, fairness key) pair of a queue: the claim shares
--              its slots among units by their tenants' weights.
--   due        jobs.due: the job's run_at had come when it was last
--              written. Due jobs (pending or retrying) are in the ready
--              set (gaffer.ready, ready.sql), which the claim reads;
--              scheduled ones (not due) in jobs_scheduled_idx, so that
--              jobs waiting for their time cost a claim nothing. A job
--              marked due whose run_at is still ahead (written by a node
--              of an older build) is never taken early: every read here
--              also checks run_at <= now().
--   rotation   units are visited in descending (tenant, fairness key)
--              order (bytes, COLLATE "C"), from below where the previous
--              claim stopped (after_*), wrapping around to the top.
--   cursor     c_*: where the caller's previous claims of a unit ended
--              (priority, run_at, id); a unit's jobs are read past it, so
--              that a deep backlog's dead index entries are not walked
--              again. The caller drops its cursors after a short claim
--              and every CursorReset.
--   claim order the order candidates are admitted in: a unit's k-th job
--              ranks (k-1)/weight, ties by the unit's place in the
--              rotation, then k. Every unit's first job comes before any
--              unit's second, so a unit with due jobs gets one as long as
--              the claim has room for one per unit.
--   side claim s_*: a claim of those units only, from their start, in
--              one round, made beside a claim in flight (job/side_claim.go).
--   grace      k_*, grace_ms: the units the caller's last claim served. A
--              unit outside them whose due jobs all came due less than
--              grace_ms ago is left to the side claim their insert asked
--              for, while a served unit is among those found.
--   lo/top     the range of tenants a claim reads: [t, t] for a remote
--              worker of tenant t, every tenant otherwise.

-- claim_promote makes up to 1,000 of queue q's scheduled jobs due, the
-- longest waiting first, wakes the queue's claims if it made any, and
-- returns how many. Rows another transaction holds are left to it. A
-- claim calls it first, in its own transaction (store.Claim): the
-- statement that starts a claim's jobs may not update rows a statement
-- within it updated, so the claim cannot promote for itself.
CREATE FUNCTION gaffer.claim_promote(q text) RETURNS integer
LANGUAGE plpgsql AS $fn$
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
$fn$;

-- claim_units returns up to m units of queue q with due jobs, in
-- descending (tenant, fairness key) order: those below (below_t,
-- below_k) and at or above (stop_t, stop_k), of tenants from lo up. It
-- skips through the ready set's index one unit at a time, from the end
-- of each unit's range, where its newest entries are, alive. (SQL, so
-- that the planner inlines it into the claim's statement.)
CREATE FUNCTION gaffer.claim_units(q text, lo text, below_t text, below_k text, stop_t text, stop_k text, m integer)
RETURNS TABLE (tenant text, fairness_key text)
LANGUAGE sql STABLE AS $fn$
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
$fn$;

-- claim_from_unit locks and returns up to lim due jobs of unit (t, k) of
-- queue q, of the kinds ks (NULL: any; empty: any but Gaffer's own
-- gaffer.* kinds, a workflow's sleep and signal steps, which only nodes
-- run — a remote worker that named no kinds), by (priority, run_at, id)
-- past the position (cp, cr, ci): a unit's part of a claim. It reads the
-- ready set (ready.sql) and locks the jobs' rows; rows another
-- transaction holds are passed over. With each job, where its ready row
-- is (slot, at: its slot and ctid), for the claim to delete it if it
-- starts the job: the row stays put while the job's row is locked.
CREATE FUNCTION gaffer.claim_from_unit(q text, t text, k text, ks text[], cp smallint, cr timestamptz, ci bigint, lim integer)
RETURNS TABLE (id bigint, kind text, slot smallint, at tid)
LANGUAGE plpgsql AS $fn$
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
$fn$;

-- claim_from_units locks the candidates of the units u_* (in rotation order)
-- for a claim of take jobs, of the kinds ks (NULL: any), and returns them
-- in claim order, one array per column: cand_unit is a candidate's
-- unit's place, cand_k its place in the unit over the whole claim (u_past
-- are those the unit gave in the claim's earlier rounds); it ranks
-- (k-1)/weight. Each unit gives its first due jobs past its cursor (c_*),
-- up to its share by weight of all the units will have given, and one
-- at least (so there may be more candidates than take). unit_more says, per unit, whether it gave its whole share (it
-- may have more: the claim looks into it again if it is not full).
-- cand_slot and cand_at say where each candidate's ready row is. The
-- claim takes a round of one unit (the usual case) itself, from
-- claim_from_unit: a statement less.
CREATE FUNCTION gaffer.claim_from_units(q text, take integer, ks text[], u_tenant text[], u_fkey text[], u_past integer[],
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[],
    OUT cand_id bigint[], OUT cand_kind text[], OUT cand_tenant text[], OUT cand_fkey text[],
    OUT cand_unit integer[], OUT cand_k integer[], OUT unit_more boolean[], OUT cand_slot smallint[], OUT cand_at tid[])
LANGUAGE plpgsql AS $fn$
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
$fn$;

-- claim picks and locks up to n due jobs of queue q for claimer (a node,
-- or a remote worker when worker is set), and returns their ids in ids,
-- where the caller's next claim of q starts in next_* (NULL: at the top),
-- started_at, the time the jobs start (when the limits admitted them, by
-- the database's clock), and busy when it claimed nothing because a limit
-- was being changed (claim again in a few milliseconds). The statement
-- that called it starts the jobs.
--   t, ks     a remote worker's tenant (NULL: any) and kinds (NULL: any)
--   s_*       a side claim's units (NULL: a claim of the whole queue)
--   c_*       the caller's cursors; after_* where its last claim stopped
--             (NULL: at the top); k_*, grace_ms the side claims' grace
-- Each round takes candidates from the units to look deeper into (d_*:
-- units that may have more than they gave, past what they gave, which
-- may be jobs a limit refused) and from the next units found; the rounds end when the claim is full, every unit had its
-- turn, or the claim looked at max_units units or weighed max_weighed
-- candidates.
-- The work is PL/pgSQL so that its plans are cached per connection, like
-- a prepared statement's. Its rounds are planned without sorts
-- (enable_sort, set for the rounds and set back after them): the ready
-- set's slots are emptied every second, so their statistics never say
-- how many rows they hold, and a plan that sorts a unit's rows instead
-- of merging its slots' ordered index scans would read all of them for
-- a few.
CREATE FUNCTION gaffer.claim_ready(q text, n integer, claimer text, worker boolean, t text, ks text[],
    s_tenant text[], s_fkey text[],
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[],
    after_tenant text, after_fkey text, k_tenant text[], k_fkey text[], grace_ms integer,
    OUT ids bigint[], OUT next_tenant text, OUT next_fkey text, OUT started_at timestamptz, OUT busy boolean,
    OUT took_slot smallint[], OUT took_at tid[])
LANGUAGE plpgsql AS $fn$
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
$fn$;

-- claim is claim_ready for the claims of the release before the ready
-- set (their statement calls it, or claim_pick and the others below):
-- the jobs they start leave the ready set by the trigger (ready.sql:
-- ready_follow), as their statement updates them.
CREATE FUNCTION gaffer.claim(q text, n integer, claimer text, worker boolean, t text, ks text[],
    s_tenant text[], s_fkey text[],
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[],
    after_tenant text, after_fkey text, k_tenant text[], k_fkey text[], grace_ms integer,
    OUT ids bigint[], OUT next_tenant text, OUT next_fkey text, OUT started_at timestamptz, OUT busy boolean)
LANGUAGE plpgsql AS $fn$
BEGIN
    SELECT c.ids, c.next_tenant, c.next_fkey, c.started_at, c.busy INTO ids, next_tenant, next_fkey, started_at, busy
    FROM gaffer.claim_ready(q, n, claimer, worker, t, ks, s_tenant, s_fkey, c_tenant, c_fkey, c_prio, c_run_at, c_id,
                            after_tenant, after_fkey, k_tenant, k_fkey, grace_ms) c;
    PERFORM set_config('gaffer.claim_leaves_ready', 'off', true);
END
$fn$;

-- The signatures of earlier builds, for nodes of those builds during a
-- rolling upgrade: each is the claim above, then the promotion of the
-- queue's scheduled jobs whose time came, for the claims after it (their
-- claim statement starts the jobs, so it cannot promote first).
-- claim_older_build keeps, of the jobs an older build's claim picked (in
-- claim order), those that build can start: not a workflow step whose
-- inputs are read by reference (jobs.inputs_from, workflow.sql), which an
-- older build would hand its worker without inputs. Such a step waits for
-- a node of this build; during a rolling upgrade that is until the first
-- one starts. The picked jobs it leaves stay pending.
CREATE FUNCTION gaffer.claim_older_build(ids bigint[]) RETURNS bigint[]
LANGUAGE sql STABLE AS $fn$
    SELECT array_agg(x.id ORDER BY x.ord)
    FROM unnest(ids) WITH ORDINALITY AS x(id, ord)
    WHERE NOT EXISTS (SELECT 1 FROM gaffer.jobs j WHERE j.id = x.id AND j.inputs_from IS NOT NULL)
$fn$;

CREATE FUNCTION gaffer.claim_pick(q text, n integer, node_id text,
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[],
    after_tenant text, after_fkey text, k_tenant text[], k_fkey text[], grace_ms integer)
RETURNS bigint[]
LANGUAGE plpgsql AS $fn$
DECLARE
    ids bigint[];
BEGIN
    SELECT c.ids INTO ids FROM gaffer.claim(q, n, node_id, false, NULL, NULL, NULL, NULL, c_tenant, c_fkey, c_prio, c_run_at, c_id,
                                            after_tenant, after_fkey, k_tenant, k_fkey, grace_ms) c;
    PERFORM gaffer.claim_promote(q);
    RETURN gaffer.claim_older_build(ids);
END
$fn$;

CREATE FUNCTION gaffer.claim_pick(q text, n integer, node_id text,
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[],
    after_tenant text, after_fkey text)
RETURNS bigint[]
LANGUAGE sql AS $fn$
    SELECT gaffer.claim_pick(q, n, node_id, c_tenant, c_fkey, c_prio, c_run_at, c_id, after_tenant, after_fkey, '{}', '{}', 0)
$fn$;

CREATE FUNCTION gaffer.claim_pick_units(q text, n integer, node_id text, u_tenant text[], u_fkey text[])
RETURNS bigint[]
LANGUAGE plpgsql AS $fn$
DECLARE
    ids bigint[];
BEGIN
    IF coalesce(cardinality(u_tenant), 0) = 0 OR cardinality(u_tenant) <> coalesce(cardinality(u_fkey), 0) THEN
        RETURN NULL;
    END IF;
    SELECT c.ids INTO ids FROM gaffer.claim(q, n, node_id, false, NULL, NULL, u_tenant, u_fkey, '{}', '{}', '{}', '{}', '{}',
                                            NULL, NULL, '{}', '{}', 0) c;
    PERFORM gaffer.claim_promote(q);
    RETURN gaffer.claim_older_build(ids);
END
$fn$;

CREATE FUNCTION gaffer.claim_pick_remote(q text, n integer, worker_id text, t text, ks text[],
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[],
    after_tenant text, after_fkey text)
RETURNS bigint[]
LANGUAGE plpgsql AS $fn$
DECLARE
    ids bigint[];
BEGIN
    SELECT c.ids INTO ids FROM gaffer.claim(q, n, worker_id, true, t, ks, NULL, NULL, c_tenant, c_fkey, c_prio, c_run_at, c_id,
                                            after_tenant, after_fkey, '{}', '{}', 0) c;
    PERFORM gaffer.claim_promote(q);
    RETURN gaffer.claim_older_build(ids);
END
$fn$;

-- queue_units (the queue depths of earlier builds): up to n units of
-- queue q with due jobs, from the top.
CREATE FUNCTION gaffer.queue_units(q text, n integer) RETURNS TABLE (tenant text, fairness_key text)
LANGUAGE sql STABLE AS $fn$
    SELECT u.tenant, u.fairness_key FROM gaffer.claim_units(q, '', chr(1114111), '', '', '', n) u
$fn$;
