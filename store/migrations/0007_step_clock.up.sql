-- Workflow step times are the moment the step moved, not the start of
-- the transaction that moved it: a completion that waited on the run's
-- lock must not stamp a time earlier than the one it waited for (the
-- chaos suite's DAG check found exactly that with now()).

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
                (SELECT coalesce(jsonb_object_agg(d.name, coalesce(d.result, 'null'::jsonb)), '{}'::jsonb)
                 FROM gaffer.workflow_steps d WHERE d.run_id = p_run AND d.name = ANY (st.depends_on)))
        RETURNING id INTO jid;
        UPDATE gaffer.workflow_steps SET state = 'active', job_id = jid, started_at = clock_timestamp()
        WHERE run_id = p_run AND name = st.name;
        PERFORM pg_notify('gaffer_jobs', st.queue);
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION gaffer.workflow_job_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r gaffer.workflow_runs;
    s gaffer.workflow_steps;
BEGIN
    -- Lock order everywhere: run, then step.
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
        UPDATE gaffer.workflow_steps SET deps_left = deps_left - 1
        WHERE run_id = r.id AND state = 'waiting' AND s.name = ANY (depends_on);
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
    NEW.inputs := (SELECT coalesce(jsonb_object_agg(d.name, coalesce(d.result, 'null'::jsonb)), '{}'::jsonb)
                   FROM gaffer.workflow_steps d WHERE d.run_id = r.id AND d.name = ANY (s.depends_on));
    UPDATE gaffer.workflow_steps
    SET state = 'active', job_id = NEW.id, result = NULL, error = NULL, finished_at = NULL, started_at = clock_timestamp()
    WHERE run_id = s.run_id AND name = s.name;
    IF r.state = 'failed' AND NOT EXISTS (
        SELECT 1 FROM gaffer.workflow_steps
        WHERE run_id = r.id AND state = 'failed' AND NOT allow_failure AND name <> s.name) THEN
        UPDATE gaffer.workflow_runs SET state = 'running', finished_at = NULL, error = NULL WHERE id = r.id;
        UPDATE gaffer.workflow_steps SET state = 'waiting', cancel_reason = NULL, finished_at = NULL
        WHERE run_id = r.id AND state = 'cancelled' AND cancel_reason = 'run_failed';
        UPDATE gaffer.workflow_steps w
        SET deps_left = (SELECT count(*) FROM gaffer.workflow_steps x
                         WHERE x.run_id = w.run_id AND x.name = ANY (w.depends_on)
                           AND NOT (x.state = 'completed' OR (x.state = 'failed' AND x.allow_failure)))
        WHERE w.run_id = r.id AND w.state = 'waiting';
        PERFORM gaffer.workflow_start_ready(r.id);
    END IF;
    RETURN NEW;
END
$$;
