-- gaffer:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS gaffer.jobs_batch_idx;
