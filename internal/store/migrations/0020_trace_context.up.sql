-- gaffer:expand
-- The W3C trace context of whoever enqueued a job (the API's traceparent
-- and tracestate headers, or the span in a Go caller's context), in its
-- canonical text: every attempt's span links to it, and remote workers
-- and the job's API view are given it. NULL for a job enqueued outside a
-- trace, which is most: a NULL costs a bit in the row's null bitmap.
--
-- Adding nullable columns rewrites nothing. The checks bound what a
-- tenant can make the table hold even if a caller skipped job's
-- validation; NOT VALID skips scanning the existing rows, which are all
-- NULL here, and every insert and update is still checked.
ALTER TABLE gaffer.jobs ADD COLUMN traceparent text, ADD COLUMN tracestate text;
ALTER TABLE gaffer.jobs ADD CONSTRAINT jobs_traceparent_check CHECK (octet_length(traceparent) = 55) NOT VALID;
ALTER TABLE gaffer.jobs ADD CONSTRAINT jobs_tracestate_check CHECK (octet_length(tracestate) <= 512) NOT VALID;
