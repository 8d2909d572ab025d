-- gaffer:generated
-- gaffer:expand
-- The routines of store/schema that differ from those 0033_step_inputs_from left,
-- written by `go run ./store/internal/migrategen`. Edit store/schema, not
-- this file, and write it again (-replace) while no release carries it.
--
--   new       function gaffer.claim_older_build(bigint[])
--   changed   function gaffer.claim_pick(text, integer, text, text[], text[], smallint[], timestamp with time zone[], bigint[], text, text, text[], text[], integer)
--   changed   function gaffer.claim_pick_remote(text, integer, text, text, text[], text[], text[], smallint[], timestamp with time zone[], bigint[], text, text)
--   changed   function gaffer.claim_pick_units(text, integer, text, text[], text[])
--   new       function gaffer.step_dependency_jobs(bigint, text[])
--   new       function gaffer.step_inputs(bigint, text, bigint[])
--   changed   function gaffer.workflow_finish_if_done(bigint)
--   new       function gaffer.workflow_output(bigint)
--   changed   function gaffer.workflow_start_ready(bigint)
--   changed   function gaffer.workflow_step_replayed()
SET LOCAL check_function_bodies = off;

-- new: gaffer.claim_older_build(bigint[]), as store/schema/claim.sql has it
CREATE OR REPLACE FUNCTION gaffer.claim_older_build(ids bigint[])
 RETURNS bigint[]
 LANGUAGE sql
 STABLE
AS $function$
    SELECT array_agg(x.id ORDER BY x.ord)
    FROM unnest(ids) WITH ORDINALITY AS x(id, ord)
    WHERE NOT EXISTS (SELECT 1 FROM gaffer.jobs j WHERE j.id = x.id AND j.inputs_from IS NOT NULL)
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
    RETURN gaffer.claim_older_build(ids);
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
    RETURN gaffer.claim_older_build(ids);
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
    RETURN gaffer.claim_older_build(ids);
END
$function$;

-- new: gaffer.step_dependency_jobs(bigint, text[]), as store/schema/workflow.sql has it
CREATE OR REPLACE FUNCTION gaffer.step_dependency_jobs(p_run bigint, p_names text[])
 RETURNS bigint[]
 LANGUAGE sql
 STABLE
AS $function$
    SELECT coalesce(array_agg(s.job_id ORDER BY s.name), '{}')
    FROM gaffer.workflow_steps s
    WHERE s.run_id = p_run AND s.name = ANY (p_names);
$function$;

-- new: gaffer.step_inputs(bigint, text, bigint[]), as store/schema/workflow.sql has it
CREATE OR REPLACE FUNCTION gaffer.step_inputs(p_run bigint, p_step text, p_from bigint[])
 RETURNS json
 LANGUAGE sql
 STABLE
AS $function$
    SELECT (SELECT coalesce('{' || string_agg(to_json(d.name)::text || ':'
                                              || coalesce(CASE WHEN d.job_id = ANY (p_from) THEN d.result::text END, 'null'),
                                              ',' ORDER BY d.name) || '}', '{}')
            FROM gaffer.workflow_steps d
            WHERE d.run_id = c.run_id AND d.name = ANY (c.depends_on))::json
    FROM gaffer.workflow_steps c
    WHERE c.run_id = p_run AND c.name = p_step;
$function$;

-- changed: gaffer.workflow_finish_if_done(bigint), as store/schema/workflow.sql has it
CREATE OR REPLACE FUNCTION gaffer.workflow_finish_if_done(p_run bigint)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF EXISTS (SELECT 1 FROM gaffer.workflow_steps WHERE run_id = p_run AND state IN ('waiting', 'active')) THEN
        RETURN;
    END IF;
    UPDATE gaffer.workflow_runs r
    SET state = 'completed', finished_at = now()
    WHERE r.id = p_run AND r.state = 'running';
END
$function$;

-- new: gaffer.workflow_output(bigint), as store/schema/workflow.sql has it
CREATE OR REPLACE FUNCTION gaffer.workflow_output(p_run bigint)
 RETURNS json
 LANGUAGE sql
 STABLE
AS $function$
    SELECT gaffer.step_results(p_run, ARRAY(
        SELECT s.name FROM gaffer.workflow_steps s
        WHERE s.run_id = p_run
          AND NOT EXISTS (SELECT 1 FROM gaffer.workflow_steps d WHERE d.run_id = p_run AND s.name = ANY (d.depends_on))))
    FROM gaffer.workflow_runs r
    WHERE r.id = p_run AND r.state = 'completed';
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
        INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, args, run_at, due, workflow_run, step, inputs_from)
        VALUES (r.tenant, st.kind, st.queue, st.priority, st.max_attempts, st.timeout_ms, st.args,
                now() + st.wait_ms * interval '1 millisecond', st.wait_ms <= 0, p_run, st.name,
                gaffer.step_dependency_jobs(p_run, st.depends_on))
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
    NEW.inputs := NULL;
    NEW.inputs_from := gaffer.step_dependency_jobs(r.id, s.depends_on);
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
