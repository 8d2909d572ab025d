-- Workflow runs advance in the database: a trigger on job state changes
-- advances the run in the transaction that finished the job, so a step
-- becomes runnable in the same transaction as its last dependency's
-- completion and nothing is lost if a node dies in between. Lock order
-- everywhere: job, run, then step.
--
-- Step times are the moment the step moved (clock_timestamp()), not the
-- start of the transaction that moved it: a completion that waited on the
-- run's lock must not stamp a time earlier than the one it waited for.

-- Start every waiting step of a running run whose dependencies are done:
-- each gets its job, carrying its inputs by reference: the jobs its
-- dependencies follow now (inputs_from), not a copy of their results.
-- Copies would write every dependency's result once per dependent, in
-- the transaction of the completion that made them ready (issue 24: 20
-- results of 250 KB to 40 steps wrote 213 MB); the results are read where
-- they live, in the run's steps, whenever the job is read
-- (gaffer.step_inputs).
CREATE FUNCTION gaffer.workflow_start_ready(p_run bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    r   gaffer.workflow_runs;
    st  gaffer.workflow_steps;
    jid bigint;
    n   integer := 0;
    -- when each step starts: its started_at, and a sleep's or signal
    -- timer's from, so a 1 s sleep never reads shorter than asked (now()
    -- is the transaction's start, earlier than the step's stamp)
    at  timestamptz;
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
        at := clock_timestamp();
        INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, args, run_at, due, workflow_run, step, inputs_from)
        VALUES (r.tenant, st.kind, st.queue, st.priority, st.max_attempts, st.timeout_ms, st.args,
                at + st.wait_ms * interval '1 millisecond', st.wait_ms <= 0, p_run, st.name,
                gaffer.step_dependency_jobs(p_run, st.depends_on))
        RETURNING id INTO jid;
        UPDATE gaffer.workflow_steps SET state = 'active', job_id = jid, started_at = at
        WHERE run_id = p_run AND name = st.name;
        PERFORM pg_notify('gaffer_jobs', st.queue);
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;

-- Complete a running run once no step waits or runs. Its output, the
-- results of the steps nothing depends on, is not copied into the run:
-- gaffer.workflow_output reads it from the steps. (A completed run's
-- steps no longer change: nothing waits or runs, and no replay resumes a
-- completed run.)
CREATE FUNCTION gaffer.workflow_finish_if_done(p_run bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM gaffer.workflow_steps WHERE run_id = p_run AND state IN ('waiting', 'active')) THEN
        RETURN;
    END IF;
    UPDATE gaffer.workflow_runs r
    SET state = 'completed', finished_at = now()
    WHERE r.id = p_run AND r.state = 'running';
END
$$;

-- A completed run's output: {"name": result, ...} of the steps nothing
-- depends on. NULL for a run that has not completed.
CREATE FUNCTION gaffer.workflow_output(p_run bigint) RETURNS json
LANGUAGE sql STABLE AS $$
    SELECT gaffer.step_results(p_run, ARRAY(
        SELECT s.name FROM gaffer.workflow_steps s
        WHERE s.run_id = p_run
          AND NOT EXISTS (SELECT 1 FROM gaffer.workflow_steps d WHERE d.run_id = p_run AND s.name = ANY (d.depends_on))))
    FROM gaffer.workflow_runs r
    WHERE r.id = p_run AND r.state = 'completed';
$$;

-- The jobs the run's steps named follow, in name order: what a step
-- starting now records as its inputs (jobs.inputs_from).
CREATE FUNCTION gaffer.step_dependency_jobs(p_run bigint, p_names text[]) RETURNS bigint[]
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(s.job_id ORDER BY s.name), '{}')
    FROM gaffer.workflow_steps s
    WHERE s.run_id = p_run AND s.name = ANY (p_names);
$$;

-- A step's inputs, {"dependency": result, ...}, read from the run's
-- steps: each dependency's result as it was recorded, if the dependency
-- still follows one of the jobs p_from names (those it followed when the
-- step started), null otherwise. A completed step's result never changes
-- (only a failed step is replayed), so a step reads the inputs it started
-- with however often it is read, and a dependency with allow_failure
-- that was replayed after the step started stays null to it, as when its
-- result was copied. NULL when the run is gone (retention deletes a run
-- only once every job of its steps finished).
CREATE FUNCTION gaffer.step_inputs(p_run bigint, p_step text, p_from bigint[]) RETURNS json
LANGUAGE sql STABLE AS $$
    SELECT (SELECT coalesce('{' || string_agg(to_json(d.name)::text || ':'
                                              || coalesce(CASE WHEN d.job_id = ANY (p_from) THEN d.result::text END, 'null'),
                                              ',' ORDER BY d.name) || '}', '{}')
            FROM gaffer.workflow_steps d
            WHERE d.run_id = c.run_id AND d.name = ANY (c.depends_on))::json
    FROM gaffer.workflow_steps c
    WHERE c.run_id = p_run AND c.name = p_step;
$$;

-- Recount the waiting steps of a run (only the dependents of
-- p_dependency, when it is not null). A step's count of dependencies left
-- is recomputed from its dependencies' states instead of decremented: a
-- dependency is done when it completed, or failed with allow_failure, and
-- counts once however often it is replayed and however each replay ends.
CREATE FUNCTION gaffer.workflow_count_deps(p_run bigint, p_dependency text) RETURNS void
LANGUAGE sql AS $$
    UPDATE gaffer.workflow_steps w
    SET deps_left = (SELECT count(*) FROM gaffer.workflow_steps x
                     WHERE x.run_id = w.run_id AND x.name = ANY (w.depends_on)
                       AND NOT (x.state = 'completed' OR (x.state = 'failed' AND x.allow_failure)))
    WHERE w.run_id = p_run AND w.state = 'waiting'
      AND (p_dependency IS NULL OR p_dependency = ANY (w.depends_on));
$$;

-- {"name": result, ...} of the run's steps named: each result as it was
-- recorded, null for a step without one, names in order. Results are kept
-- as their text (json), so step inputs and run outputs are built as text
-- too, not with jsonb_object_agg.
CREATE FUNCTION gaffer.step_results(p_run bigint, p_names text[]) RETURNS json
LANGUAGE sql STABLE AS $$
    SELECT coalesce('{' || string_agg(to_json(s.name)::text || ':' || coalesce(s.result::text, 'null'), ',' ORDER BY s.name) || '}', '{}')::json
    FROM gaffer.workflow_steps s
    WHERE s.run_id = p_run AND s.name = ANY (p_names);
$$;

-- A step's job finished (completed, failed into the DLQ, or cancelled):
-- the step records it; a completed step (or a failed one that allows
-- failure) lets its dependents start, any other end fails or cancels the
-- run and cancels its waiting steps.
CREATE FUNCTION gaffer.workflow_job_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r gaffer.workflow_runs;
    s gaffer.workflow_steps;
BEGIN
    -- Lock order everywhere: job (this one, held by the statement that
    -- finished it), run, then step. Cancel takes them in the same order.
    SELECT * INTO r FROM gaffer.workflow_runs WHERE id = NEW.workflow_run FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT * INTO s FROM gaffer.workflow_steps WHERE run_id = NEW.workflow_run AND name = NEW.step FOR UPDATE;
    IF NOT FOUND OR s.job_id IS DISTINCT FROM NEW.id OR s.state <> 'active' THEN
        RETURN NULL; -- a job the step no longer follows
    END IF;
    UPDATE gaffer.workflow_steps
    SET state = NEW.state, finished_at = clock_timestamp(),
        result = CASE WHEN NEW.state = 'completed' THEN NEW.result END,
        error = CASE WHEN NEW.state <> 'completed' THEN NEW.errors -> -1 ->> 'error' END,
        cancel_reason = CASE WHEN NEW.state = 'cancelled' THEN 'job cancelled' END
    WHERE run_id = s.run_id AND name = s.name;
    IF r.state <> 'running' THEN
        RETURN NULL; -- a finished run records late steps but moves nothing
    END IF;
    IF NEW.state = 'completed' OR (NEW.state = 'failed' AND s.allow_failure) THEN
        PERFORM gaffer.workflow_count_deps(r.id, s.name);
        PERFORM gaffer.workflow_start_ready(r.id);
        PERFORM gaffer.workflow_finish_if_done(r.id);
    ELSE
        UPDATE gaffer.workflow_runs
        SET state = CASE WHEN NEW.state = 'failed' THEN 'failed' ELSE 'cancelled' END,
            finished_at = clock_timestamp(), error = format('step %s %s', s.name, NEW.state)
        WHERE id = r.id;
        UPDATE gaffer.workflow_steps SET state = 'cancelled', cancel_reason = 'run_failed', finished_at = clock_timestamp()
        WHERE run_id = r.id AND state = 'waiting';
    END IF;
    RETURN NULL;
END
$$;

-- job_finishes is its condition past the workflow_run test: a function,
-- so that the condition every write of gaffer.jobs reads stays short
-- (job_checks_test.go).
CREATE FUNCTION gaffer.job_finishes(old_state text, new_state text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    RETURN new_state IS DISTINCT FROM old_state AND new_state IN ('completed', 'failed', 'cancelled');
END
$fn$;

CREATE TRIGGER workflow_job_finished AFTER UPDATE OF state ON gaffer.jobs
    FOR EACH ROW
    WHEN (NEW.workflow_run IS NOT NULL AND gaffer.job_finishes(OLD.state, NEW.state))
    EXECUTE FUNCTION gaffer.workflow_job_finished();

-- A DLQ replay of a failed step's job: the step follows the new job and
-- is no longer done, so its waiting dependents wait for the replay (and
-- see its result). If nothing else holds the run failed, the run resumes:
-- its cancelled steps wait again, and those with nothing left to wait for
-- start at once. A replayed sleep or signal step's timer job is due when
-- its timer ends, as when the step first started: a replayed signal step
-- waits for its signal again.
CREATE FUNCTION gaffer.workflow_step_replayed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r  gaffer.workflow_runs;
    s  gaffer.workflow_steps;
    -- the step's new start, and its timer's from (as workflow_start_ready)
    at timestamptz;
BEGIN
    SELECT * INTO r FROM gaffer.workflow_runs WHERE id = NEW.workflow_run FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NEW;
    END IF;
    SELECT * INTO s FROM gaffer.workflow_steps WHERE run_id = NEW.workflow_run AND name = NEW.step FOR UPDATE;
    IF NOT FOUND OR s.state <> 'failed' OR r.state NOT IN ('running', 'failed') THEN
        RETURN NEW;
    END IF;
    NEW.inputs := NULL;
    NEW.inputs_from := gaffer.step_dependency_jobs(r.id, s.depends_on);
    -- The step starts over as workflow_start_ready starts it: a signal
    -- step's timer runs its whole timeout again (due at once, it would
    -- fail before any signal could arrive), a sleep sleeps again.
    at := clock_timestamp();
    NEW.run_at := at + s.wait_ms * interval '1 millisecond';
    NEW.due := s.wait_ms <= 0;
    UPDATE gaffer.workflow_steps
    SET state = 'active', job_id = NEW.id, result = NULL, error = NULL, finished_at = NULL, started_at = at
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
$$;

CREATE TRIGGER workflow_step_replayed BEFORE INSERT ON gaffer.jobs
    FOR EACH ROW
    WHEN (NEW.workflow_run IS NOT NULL AND NEW.replay_of IS NOT NULL)
    EXECUTE FUNCTION gaffer.workflow_step_replayed();
