-- gaffer:expand
-- The W3C trace context of whoever enqueued a job (the API's traceparent
-- and tracestate headers, or the span in a Go caller's context), in its
-- canonical text: every attempt's span links to it, and an http job's
-- call carries it. NULL for a job enqueued outside a trace, which is
-- most: a NULL costs a bit in the row's null bitmap, and the claim reads
-- nothing more than that.
--
-- Adding nullable columns rewrites nothing. The checks bound what a
-- tenant can make the table hold even if a caller skipped job's
-- validation: the one traceparent form stored, a tracestate of at most
-- 512 bytes. NOT VALID skips scanning the existing rows, which are all
-- NULL here; every insert and update is still checked.
ALTER TABLE gaffer.jobs ADD COLUMN traceparent text, ADD COLUMN tracestate text;
ALTER TABLE gaffer.jobs ADD CONSTRAINT jobs_traceparent_check
    CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$') NOT VALID;
ALTER TABLE gaffer.jobs ADD CONSTRAINT jobs_tracestate_check
    CHECK (tracestate IS NULL OR (octet_length(tracestate) <= 512 AND traceparent IS NOT NULL)) NOT VALID;
