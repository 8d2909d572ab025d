-- gaffer:no-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_claim_idx ON gaffer.jobs (queue, tenant COLLATE "C", fairness_key COLLATE "C", priority, run_at, id) INCLUDE (state)
    WHERE state IN ('pending', 'retrying');
ALTER TABLE gaffer.limit_buckets ADD COLUMN IF NOT EXISTS bound_fence xid8;
