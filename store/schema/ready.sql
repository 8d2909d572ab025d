-- The ready set (gaffer.ready, tables.sql): one row for each claimable
-- job, kept exact by the claim and by the triggers here.
--   ready_enter   jobs inserted claimable enter it (one statement's rows
--                 at a time)
--   ready_follow  a job that becomes claimable enters it, one that stops
--                 being claimable leaves it, one whose claim order
--                 changes moves in it; except a job a claim statement of
--                 this release starts, whose row that statement deletes
--                 (store/queries/jobs.sql: claim_jobs; ready_leave)
--   ready_gone    a claimable job deleted leaves it (ready_cleared: all
--                 of them, when gaffer.jobs is truncated)
--   ready_rotate  the ring's turn: the slot written two steps ago is
--                 emptied by TRUNCATE and becomes the slot rows enter
-- A job is claimable when it is pending or retrying and due.

-- ready_leave deletes, of the ready rows at ats (ctids) in slots, those
-- of jobs ids: the claim statement's (claim_jobs), with where claim_ready
-- found each job's row and the ids of the jobs it started. Only those: a
-- job the claim picked that its statement did not start (one committed
-- after the statement's snapshot was taken, which its update does not
-- see) keeps its row and stays claimable. By ctid, in each slot's own
-- table: no index is walked; by id, for a started job whose row a
-- change committed between the claim's read and its lock put elsewhere.
CREATE FUNCTION gaffer.ready_leave(slots smallint[], ats tid[], ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $fn$
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
$fn$;

CREATE FUNCTION gaffer.ready_enter() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO gaffer.ready (slot, queue, tenant, fairness_key, priority, run_at, id, kind)
    SELECT (SELECT g.cur FROM gaffer.ready_ring g), n.queue, n.tenant, n.fairness_key, n.priority, n.run_at, n.id, n.kind
    FROM entered n
    WHERE n.state IN ('pending', 'retrying') AND n.due;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER ready_enter AFTER INSERT ON gaffer.jobs
    REFERENCING NEW TABLE AS entered
    FOR EACH STATEMENT
    EXECUTE FUNCTION gaffer.ready_enter();

-- (ready_follow and ready_gone find a row by all six columns of its
-- slot's index, which the planner reads rather than the slot. They do
-- not turn sequential scans off: their insert reads gaffer.ready_ring,
-- which has no index to read instead, and a plan that cannot avoid a
-- disabled scan was made anew at every call, 26 ms a row.)
-- job_ready_turns is ready_follow's condition: a change that may move a
-- job into, out of or within the ready set, other than its start by a
-- claim statement that deletes the ready rows itself (claim_ready sets
-- gaffer.claim_leaves_ready for its transaction; an older release's
-- claim, through gaffer.claim, does not, and its starts fire it). SQL,
-- so that it is inlined into the condition, where it costs the claim and
-- the completion (which write 'running' and leave it) a comparison or
-- two; a function, so that the condition every write of gaffer.jobs
-- reads stays short (job_checks_test.go).
CREATE FUNCTION gaffer.job_ready_turns(old_state text, new_state text) RETURNS boolean
LANGUAGE sql STABLE AS $fn$
    SELECT (new_state <> 'running' OR current_setting('gaffer.claim_leaves_ready', true) IS DISTINCT FROM 'on')
           AND (old_state IN ('pending', 'retrying') OR new_state IN ('pending', 'retrying'))
$fn$;

CREATE FUNCTION gaffer.ready_follow() RETURNS trigger
LANGUAGE plpgsql AS $fn$
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
$fn$;

CREATE TRIGGER ready_follow AFTER UPDATE ON gaffer.jobs
    FOR EACH ROW
    WHEN (gaffer.job_ready_turns(OLD.state, NEW.state))
    EXECUTE FUNCTION gaffer.ready_follow();

CREATE FUNCTION gaffer.ready_gone() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM gaffer.ready r
    WHERE r.queue = OLD.queue AND r.tenant COLLATE "C" = OLD.tenant AND r.fairness_key COLLATE "C" = OLD.fairness_key
      AND r.priority = OLD.priority AND r.run_at = OLD.run_at AND r.id = OLD.id;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER ready_gone AFTER DELETE ON gaffer.jobs
    FOR EACH ROW
    WHEN (OLD.state IN ('pending', 'retrying') AND OLD.due)
    EXECUTE FUNCTION gaffer.ready_gone();

-- gaffer.jobs emptied (TRUNCATE): so is the ready set.
CREATE FUNCTION gaffer.ready_cleared() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    TRUNCATE gaffer.ready;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER ready_cleared AFTER TRUNCATE ON gaffer.jobs
    FOR EACH STATEMENT
    EXECUTE FUNCTION gaffer.ready_cleared();

-- ready_rotate turns the ring one step, if it can: it locks the slot
-- after the current one (the slot written two steps ago), waiting at
-- most wait_ms for the claims that read it to end; if that slot holds at
-- most move_max rows, it moves those of still claimable jobs into the
-- current slot (as the jobs are now: a row a race left behind is
-- dropped or set right here), empties the slot with TRUNCATE, and makes it the slot
-- rows enter. It returns whether it turned, how many rows it moved, and
-- otherwise why not: 'busy' (another turn under way), 'locked' (a
-- transaction kept the slot past wait_ms) or 'full' (the slot holds more
-- than move_max rows: a backlog, left where it is; the ring waits until
-- claims have taken it). The caller runs it in a READ COMMITTED
-- transaction of its own (it refuses any other).
--
-- The rows moved find their jobs by id, one at a time (LIMIT 1 keeps the
-- planner from joining the other way round, or by hash or merge: any of
-- those would read the whole job table while every claim waits).
--
-- Why this is safe: every transaction that reads or writes a slot holds
-- a lock on it until it ends, so while the lock is held no claim, no
-- enqueue and no trigger is using the slot; rows are counted and moved
-- after the lock is granted, so every row committed into it is counted.
-- A claim whose snapshot was taken before the turn committed and that
-- reads the ring after it sees neither the emptied slot's rows nor the
-- moved ones: it misses them for that statement, and the next claim
-- finds them.
CREATE FUNCTION gaffer.ready_rotate(move_max integer, wait_ms integer, OUT turned boolean, OUT moved integer, OUT why text)
LANGUAGE plpgsql AS $fn$
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
$fn$;
