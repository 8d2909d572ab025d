-- gaffer:no-transaction
-- gaffer:expand
-- Sequences' indexes; only jobs enqueued with a sequence enter them.
-- jobs_held_idx: a sequence's waiting jobs in enqueue order, where the
-- next turn is found. jobs_sequence_turn_idx: at most one job of a
-- sequence is pending, running or retrying — the triggers keep it so,
-- and this makes a slip an error rather than two jobs of a sequence at
-- once. jobs_sequence_idx: a sequence's jobs, newest first (GET
-- /v1/jobs?sequence=).
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_held_idx ON gaffer.jobs (tenant, sequence_key, id)
    WHERE state = 'held';
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS jobs_sequence_turn_idx ON gaffer.jobs (tenant, sequence_key)
    WHERE sequence_key IS NOT NULL AND state IN ('pending', 'running', 'retrying');
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_sequence_idx ON gaffer.jobs (tenant, sequence_key, id)
    WHERE sequence_key IS NOT NULL;
