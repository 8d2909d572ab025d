-- gaffer:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS gaffer.jobs_tags_idx;
