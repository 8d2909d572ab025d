-- gaffer:no-transaction
-- gaffer:expand
-- One not-yet-started job per (tenant, debounce key): the arbiter of
-- insert_job_debounced's ON CONFLICT, which makes a later enqueue of the
-- key update that job atomically, on every node. A job leaves it when it
-- first starts (attempt 1). Partial: only jobs enqueued with debounce
-- enter it.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS jobs_debounce_idx ON gaffer.jobs (tenant, debounce_key)
    WHERE debounce_key IS NOT NULL AND state = 'pending' AND attempt = 0;
