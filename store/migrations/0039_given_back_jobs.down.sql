-- gaffer:generated
-- Back to the routines 0038_claim_instant left, written by migrategen with
-- 0039_given_back_jobs.up.sql.
SET LOCAL check_function_bodies = off;

-- gaffer.release_node_jobs(text[], text) as 0023_remote_claim left it
CREATE OR REPLACE FUNCTION gaffer.release_node_jobs(node_ids text[], reason text)
 RETURNS integer
 LANGUAGE sql
AS $function$
    WITH upd AS (
        UPDATE gaffer.jobs j
        SET state = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'pending' END,
            finalized_at = CASE WHEN j.cancel_requested THEN now() END,
            run_at = now(), max_attempts = j.max_attempts + 1, lease_expires_at = NULL,
            errors = gaffer.append_attempt_error(j.errors, jsonb_build_object(
                'attempt', j.attempt, 'at', now(), 'error', reason, 'kind', 'released', 'node', j.node))
        WHERE j.state = 'running' AND j.node = ANY (node_ids)
        RETURNING j.queue, j.state
    ), wake AS (
        SELECT pg_notify('gaffer_jobs', qs.q) FROM (SELECT DISTINCT u.queue AS q FROM upd u WHERE u.state = 'pending') qs
    )
    SELECT ((SELECT count(*) FROM upd) + 0 * (SELECT count(*) FROM wake))::integer
$function$;
