-- Routines of a job's own rows, used by the statements in
-- store/queries/jobs.sql.

-- A job's error history is bounded: it keeps the first 3 attempts' errors
-- and the most recent ones, 20 entries in all, with one entry of kind
-- 'omitted' counting what was dropped between them (its attempt and at
-- are those of the last attempt it stands for). A job with 1,000
-- attempts (or a DLQ entry made from it) stays small however often it
-- fails. Each error's text is capped where it is written (store.capText).
CREATE FUNCTION gaffer.append_attempt_error(errs jsonb, e jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN jsonb_array_length(errs) < 20 THEN errs || jsonb_build_array(e)
        ELSE jsonb_path_query_array(errs, '$[0 to 2]')
             || jsonb_build_array(jsonb_build_object(
                    'kind', 'omitted', 'omitted', o.n,
                    -- the last attempt left out: the one dropped now
                    'attempt', errs -> 4 -> 'attempt', 'at', errs -> 4 -> 'at',
                    'error', o.n || ' earlier attempts'' errors omitted'))
             || jsonb_path_query_array(errs, '$[5 to last]')
             || jsonb_build_array(e)
    END
    FROM (SELECT CASE WHEN errs -> 3 ->> 'kind' = 'omitted' THEN (errs -> 3 ->> 'omitted')::int + 1 ELSE 2 END AS n) o
$$;
