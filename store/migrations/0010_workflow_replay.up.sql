-- Workflow runs and DLQ replays of their steps.
--
-- A step's count of dependencies left is recomputed from its
-- dependencies' states instead of decremented: a dependency is done when
-- it completed, or failed with allow_failure, and counts once however
-- often it is replayed and however each replay ends. (Decrementing
-- counted an allow_failure step once for its failure and again for each
-- replay that finished, so its dependent started before its other
-- dependencies had run.)
--
-- A replayed sleep or signal step's timer job is due when its timer ends,
-- as when the step first started, not at once: a replayed signal step
-- waits for its signal again.
--
-- A resumed run brings back every step cancelled while it was failed,
-- not only those cancelled before they started: a step whose job was
-- cancelled in the failed run left its dependents waiting for ever.

-- Recount the waiting steps of a run (only the dependents of
-- p_dependency, when it is not null).
CREATE FUNCTION gaffer.workflow_count_deps(p_run bigint, p_dependency text) RETURNS void
LANGUAGE sql AS $$
    UPDATE gaffer.workflow_steps w
    SET deps_left = (SELECT count(*) FROM gaffer.workflow_steps x
                     WHERE x.run_id = w.run_id AND x.name = ANY (w.depends_on)
                       AND NOT (x.state = 'completed' OR (x.state = 'failed' AND x.allow_failure)))
    WHERE w.run_id = p_run AND w.state = 'waiting'
      AND (p_dependency IS NULL OR p_dependency = ANY (w.depends_on));
$$;

CREATE OR REPLACE FUNCTION gaffer.workflow_job_finished() RETURNS trigger
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

-- A DLQ replay of a failed step's job: the step follows the new job and
-- is no longer done, so its waiting dependents wait for the replay (and
-- see its result). If nothing else holds the run failed, the run resumes:
-- its cancelled steps wait again, and those with nothing left to wait for
-- start at once.
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
