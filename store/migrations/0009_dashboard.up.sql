-- The dashboard finds a failed job's DLQ entry by job id.
CREATE INDEX dlq_job_idx ON gaffer.dlq (job_id);

-- Queue depths by state without visiting the heap: the claim index
-- carries each entry's state (pending or retrying), so a capped count of
-- a queue's pending jobs is an index-only scan.
CREATE INDEX jobs_claim_state_idx ON gaffer.jobs (queue, priority, run_at, id) INCLUDE (state)
    WHERE state IN ('pending', 'retrying');
DROP INDEX gaffer.jobs_claim_idx;
ALTER INDEX gaffer.jobs_claim_state_idx RENAME TO jobs_claim_idx;

-- Retrying jobs are few, and counting them should not walk a backlog of
-- pending ones. Only jobs that fail an attempt ever enter this index.
CREATE INDEX jobs_retrying_idx ON gaffer.jobs (queue) WHERE state = 'retrying';

-- Failed and cancelled jobs are a small share of the table; listing them
-- newest first should not walk past every completed job to find them.
CREATE INDEX jobs_failed_idx ON gaffer.jobs (id) WHERE state = 'failed';
CREATE INDEX jobs_cancelled_idx ON gaffer.jobs (id) WHERE state = 'cancelled';
