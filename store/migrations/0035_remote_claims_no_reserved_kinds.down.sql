-- gaffer:generated
-- Back to the routines 0034_step_inputs_by_reference left, written by migrategen with
-- 0035_remote_claims_no_reserved_kinds.up.sql.
SET LOCAL check_function_bodies = off;

-- gaffer.claim_unit(text, text, text, text[], smallint, timestamp with time zone, bigint, integer) as 0031_one_claim left it
CREATE OR REPLACE FUNCTION gaffer.claim_unit(q text, t text, k text, ks text[], cp smallint, cr timestamp with time zone, ci bigint, lim integer)
 RETURNS TABLE(id bigint, kind text)
 LANGUAGE plpgsql
AS $function$
BEGIN
    RETURN QUERY
    SELECT j.id, j.kind FROM gaffer.jobs j
    WHERE j.state IN ('pending', 'retrying') AND j.due AND j.queue = q
      AND j.tenant COLLATE "C" = t AND j.fairness_key COLLATE "C" = k AND j.run_at <= now()
      AND (j.priority, j.run_at, j.id) > (coalesce(cp, -1::smallint), coalesce(cr, '-infinity'::timestamptz), coalesce(ci, 0::bigint))
      AND (ks IS NULL OR j.kind = ANY (ks))
    ORDER BY j.priority, j.run_at, j.id
    LIMIT lim
    FOR UPDATE SKIP LOCKED;
END
$function$;
