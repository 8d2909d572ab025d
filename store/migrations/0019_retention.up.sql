-- gaffer:no-transaction
-- gaffer:expand
-- Retention of finished workflow runs, oldest first; a failed run is kept
-- while an unreplayed DLQ entry of one of its steps could resume it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS workflow_runs_finished_idx
    ON gaffer.workflow_runs (finished_at) WHERE state <> 'running';
CREATE INDEX CONCURRENTLY IF NOT EXISTS dlq_workflow_run_idx
    ON gaffer.dlq (workflow_run) WHERE workflow_run IS NOT NULL AND replayed_at IS NULL;
