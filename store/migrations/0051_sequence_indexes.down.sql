-- gaffer:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS gaffer.jobs_sequence_idx;
DROP INDEX CONCURRENTLY IF EXISTS gaffer.jobs_sequence_turn_idx;
DROP INDEX CONCURRENTLY IF EXISTS gaffer.jobs_held_idx;
