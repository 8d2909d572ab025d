-- gaffer:generated
-- Back to the routines 0041_uncounted_attempts left, written by migrategen with
-- 0042_release_counts_uncounted.up.sql.
SET LOCAL check_function_bodies = off;

-- gaffer.release_node_jobs(text[], text) as 0039_given_back_jobs left it
CREATE OR REPLACE FUNCTION gaffer.release_node_jobs(node_ids text[], reason text)
 RETURNS integer
 LANGUAGE sql
AS $function$
    WITH upd AS (
        UPDATE gaffer.jobs j
        SET state = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'pending' END,
            node = CASE WHEN j.cancel_requested THEN j.node END, -- a waiting job is on no node
            finalized_at = CASE WHEN j.cancel_requested THEN now() END,
            max_attempts = j.max_attempts + 1, lease_expires_at = NULL, -- run_at kept: its place in line
            errors = gaffer.append_attempt_error(j.errors, jsonb_build_object(
                'attempt', j.attempt, 'at', now(), 'error', reason, 'kind', 'released', 'node', j.node))
        WHERE j.state = 'running' AND j.node = ANY (node_ids)
        RETURNING j.queue, j.state
    ), wake AS (
        SELECT pg_notify('gaffer_jobs', qs.q) FROM (SELECT DISTINCT u.queue AS q FROM upd u WHERE u.state = 'pending') qs
    )
    SELECT ((SELECT count(*) FROM upd) + 0 * (SELECT count(*) FROM wake))::integer
$function$;
