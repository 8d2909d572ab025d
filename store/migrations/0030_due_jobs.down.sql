-- gaffer:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS gaffer.jobs_scheduled_idx;
DROP INDEX CONCURRENTLY IF EXISTS gaffer.jobs_due_idx;
ALTER TABLE gaffer.jobs DROP COLUMN IF EXISTS due;
