-- The dashboard finds a failed job's DLQ entry by job id.
CREATE INDEX dlq_job_idx ON gaffer.dlq (job_id);
