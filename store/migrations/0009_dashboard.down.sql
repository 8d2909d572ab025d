DROP INDEX gaffer.jobs_cancelled_idx;
DROP INDEX gaffer.jobs_failed_idx;
DROP INDEX gaffer.jobs_retrying_idx;
CREATE INDEX jobs_claim_plain_idx ON gaffer.jobs (queue, priority, run_at, id)
    WHERE state IN ('pending', 'retrying');
DROP INDEX gaffer.jobs_claim_idx;
ALTER INDEX gaffer.jobs_claim_plain_idx RENAME TO jobs_claim_idx;
DROP INDEX gaffer.dlq_job_idx;
