-- gaffer:no-transaction
-- gaffer:expand
-- A batch's jobs in id order: GET /v1/jobs?batch=, and the failed job
-- ids a batch's callback carries. Partial: only batch jobs enter it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_batch_idx ON gaffer.jobs (batch_id, id) WHERE batch_id IS NOT NULL;
