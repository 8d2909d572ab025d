-- Args, results, step inputs, run outputs and cron templates are kept as
-- the text that was sent (type json), not re-encoded (jsonb would sort
-- keys, respell numbers and drop whitespace): receivers that sign, hash
-- or diff a payload get the bytes its sender wrote. Duplicate member
-- names, which json would keep and jsonb would not, are refused where
-- payloads enter (job.CheckJSONText).
--
-- This rewrites jobs, dlq, workflow_steps, workflow_runs and
-- cron_entries under an exclusive lock: docs/operations.md gives the time
-- it takes per million jobs.

ALTER TABLE gaffer.jobs
    ALTER COLUMN args DROP DEFAULT,
    ALTER COLUMN args TYPE json USING args::json,
    ALTER COLUMN args SET DEFAULT '{}',
    ALTER COLUMN result TYPE json USING result::json,
    ALTER COLUMN inputs TYPE json USING inputs::json;
ALTER TABLE gaffer.dlq ALTER COLUMN args TYPE json USING args::json;
ALTER TABLE gaffer.workflow_steps
    ALTER COLUMN args TYPE json USING args::json,
    ALTER COLUMN result TYPE json USING result::json;
ALTER TABLE gaffer.workflow_runs ALTER COLUMN output TYPE json USING output::json;
ALTER TABLE gaffer.cron_entries ALTER COLUMN job TYPE json USING job::json;

-- {"name": result, ...} of the run's steps named: each result as it was
-- recorded, null for a step without one, names in order.
CREATE FUNCTION gaffer.step_results(p_run bigint, p_names text[]) RETURNS json
LANGUAGE sql STABLE AS $$
    SELECT coalesce('{' || string_agg(to_json(s.name)::text || ':' || coalesce(s.result::text, 'null'), ',' ORDER BY s.name) || '}', '{}')::json
    FROM gaffer.workflow_steps s
    WHERE s.run_id = p_run AND s.name = ANY (p_names);
$$;

CREATE OR REPLACE FUNCTION gaffer.workflow_start_ready(p_run bigint) RETURNS integer
LANGUAGE plpgsql AS $$
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
        INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, args, run_at, workflow_run, step, inputs)
        VALUES (r.tenant, st.kind, st.queue, st.priority, st.max_attempts, st.timeout_ms, st.args,
                now() + st.wait_ms * interval '1 millisecond', p_run, st.name,
                gaffer.step_results(p_run, st.depends_on))
        RETURNING id INTO jid;
        UPDATE gaffer.workflow_steps SET state = 'active', job_id = jid, started_at = clock_timestamp()
        WHERE run_id = p_run AND name = st.name;
        PERFORM pg_notify('gaffer_jobs', st.queue);
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION gaffer.workflow_finish_if_done(p_run bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM gaffer.workflow_steps WHERE run_id = p_run AND state IN ('waiting', 'active')) THEN
        RETURN;
    END IF;
    UPDATE gaffer.workflow_runs r
    SET state = 'completed', finished_at = now(),
        output = gaffer.step_results(p_run, ARRAY(
            SELECT s.name FROM gaffer.workflow_steps s
            WHERE s.run_id = p_run
              AND NOT EXISTS (SELECT 1 FROM gaffer.workflow_steps d WHERE d.run_id = p_run AND s.name = ANY (d.depends_on))))
    WHERE r.id = p_run AND r.state = 'running';
END
$$;

CREATE OR REPLACE FUNCTION gaffer.workflow_step_replayed() RETURNS trigger
LANGUAGE plpgsql AS $$
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
$$;
