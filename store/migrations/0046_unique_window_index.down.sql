-- gaffer:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS gaffer.jobs_unique_window_idx;
