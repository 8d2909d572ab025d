-- gaffer:generated
-- gaffer:expand
-- The routines of store/schema that differ from those 0034_step_inputs_by_reference left,
-- written by `go run ./store/internal/migrategen`. Edit store/schema, not
-- this file, and write it again (-replace) while no release carries it.
--
--   changed   function gaffer.claim_unit(text, text, text, text[], smallint, timestamp with time zone, bigint, integer)
SET LOCAL check_function_bodies = off;

-- changed: gaffer.claim_unit(text, text, text, text[], smallint, timestamp with time zone, bigint, integer), as store/schema/claim.sql has it
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
      AND (ks IS NULL OR j.kind = ANY (ks) OR cardinality(ks) = 0 AND NOT starts_with(j.kind, 'gaffer.'))
    ORDER BY j.priority, j.run_at, j.id
    LIMIT lim
    FOR UPDATE SKIP LOCKED;
END
$function$;
