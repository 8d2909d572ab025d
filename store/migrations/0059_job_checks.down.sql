ALTER TABLE gaffer.jobs
    DROP CONSTRAINT jobs_tags_check,
    ADD CONSTRAINT jobs_tags_check
        CHECK (array_ndims(tags) = 1 AND cardinality(tags) BETWEEN 1 AND 16 AND array_position(tags, NULL) IS NULL
               AND array_to_string(tags, ',') ~ '^[A-Za-z0-9_.:/=+@-]{1,64}(,[A-Za-z0-9_.:/=+@-]{1,64})*$'
               AND cardinality(string_to_array(array_to_string(tags, ','), ',')) = cardinality(tags)) NOT VALID,
    DROP CONSTRAINT jobs_progress_check,
    ADD CONSTRAINT jobs_progress_check
        CHECK (progress BETWEEN 0 AND 100 AND octet_length(progress_message) <= 1024) NOT VALID,
    DROP CONSTRAINT jobs_tracestate_check,
    ADD CONSTRAINT jobs_tracestate_check
        CHECK (tracestate IS NULL OR (octet_length(tracestate) <= 512 AND traceparent IS NOT NULL)) NOT VALID;
DROP FUNCTION gaffer.job_ends(text, text);
DROP FUNCTION gaffer.job_tracestate_ok(text, text);
DROP FUNCTION gaffer.job_progress_ok(double precision, text);
DROP FUNCTION gaffer.job_tags_ok(text[]);
