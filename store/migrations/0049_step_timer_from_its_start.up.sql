-- gaffer:generated
-- gaffer:expand
-- The routines of store/schema that differ from those 0048_debounce_index left,
-- written by `go run ./store/internal/migrategen`. Edit store/schema, not
-- this file, and write it again (-replace) while no release carries it.
--
--   changed   function gaffer.workflow_start_ready(bigint)
--   changed   function gaffer.workflow_step_replayed()
SET LOCAL check_function_bodies = off;

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
$function$;

-- changed: gaffer.workflow_step_replayed(), as store/schema/workflow.sql has it
CREATE OR REPLACE FUNCTION gaffer.workflow_step_replayed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
$function$;
