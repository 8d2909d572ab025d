DROP INDEX gaffer.dlq_job_idx;
