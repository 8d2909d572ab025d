-- gaffer:expand
-- Every statement that writes gaffer.jobs reads the table's checks and its
-- triggers' conditions anew from their stored form (PostgreSQL parses
-- them per statement, not per session), so each written-out condition
-- costs every claim, completion and enqueue statement its reading, used
-- or not. The three longest checks (tags 4.3 KB stored, progress 1.7 KB,
-- tracestate 1.0 KB) now call a function, for rows that hold the value
-- only; the triggers' conditions follow in 0060. The functions are
-- written here, not generated, because the checks need them and
-- migrategen writes routines only after the tables are as
-- store/schema/tables.sql says (TestSchemaMatchesMigrations holds the two
-- texts equal). Dropping a check and adding its equal NOT VALID scans
-- nothing; binaries of the release before write nothing the checks
-- would treat differently.
CREATE FUNCTION gaffer.job_tags_ok(tags text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    -- At most 16 tags, each 1-64 bytes of [A-Za-z0-9_.:/=+@-], checked
    -- in the tags joined by ',': the pattern bounds every piece, and
    -- there are as many pieces as tags (a tag holding ',' would make
    -- more).
    RETURN array_ndims(tags) = 1 AND cardinality(tags) BETWEEN 1 AND 16 AND array_position(tags, NULL) IS NULL
       AND array_to_string(tags, ',') ~ '^[A-Za-z0-9_.:/=+@-]{1,64}(,[A-Za-z0-9_.:/=+@-]{1,64})*$'
       AND cardinality(string_to_array(array_to_string(tags, ','), ',')) = cardinality(tags);
END
$fn$;

CREATE FUNCTION gaffer.job_progress_ok(progress double precision, message text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    RETURN progress BETWEEN 0 AND 100 AND octet_length(message) <= 1024;
END
$fn$;

-- A tracestate of at most 512 bytes, only beside a traceparent.
CREATE FUNCTION gaffer.job_tracestate_ok(tracestate text, traceparent text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    RETURN octet_length(tracestate) <= 512 AND traceparent IS NOT NULL;
END
$fn$;

-- Whether a change of a job's state from old_state to new_state ends it:
-- final states are terminal, so a job ends once.
CREATE FUNCTION gaffer.job_ends(old_state text, new_state text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    RETURN new_state IN ('completed', 'failed', 'cancelled') AND old_state NOT IN ('completed', 'failed', 'cancelled');
END
$fn$;

ALTER TABLE gaffer.jobs
    DROP CONSTRAINT jobs_tags_check,
    ADD CONSTRAINT jobs_tags_check CHECK (tags IS NULL OR gaffer.job_tags_ok(tags)) NOT VALID,
    DROP CONSTRAINT jobs_progress_check,
    ADD CONSTRAINT jobs_progress_check
        CHECK (progress IS NULL AND progress_message IS NULL OR gaffer.job_progress_ok(progress, progress_message)) NOT VALID,
    DROP CONSTRAINT jobs_tracestate_check,
    ADD CONSTRAINT jobs_tracestate_check CHECK (tracestate IS NULL OR gaffer.job_tracestate_ok(tracestate, traceparent)) NOT VALID;
