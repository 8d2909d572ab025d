-- gaffer:no-transaction
DROP INDEX CONCURRENTLY IF EXISTS gaffer.dlq_workflow_run_idx;
DROP INDEX CONCURRENTLY IF EXISTS gaffer.workflow_runs_finished_idx;
