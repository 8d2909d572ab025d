-- gaffer:no-transaction
-- gaffer:expand
-- The claim reads jobs_due_idx since 0031: the old claim index goes, and
-- with it the buckets' fence (0029), which the limits lock replaces
-- (store/schema/limits.sql). Nodes of earlier builds claim through the
-- claim of 0031; their queue-depth views read the table without it.
DROP INDEX CONCURRENTLY IF EXISTS gaffer.jobs_claim_idx;
ALTER TABLE gaffer.limit_buckets DROP COLUMN IF EXISTS bound_fence;
