-- gaffer:no-transaction
-- gaffer:expand
-- Jobs waiting for their run_at leave the claim index (issue 23): a job is
-- due (jobs.due) when its run_at had come when it was written, and the
-- claim index holds due jobs only (jobs_due_idx), so that a unit whose
-- jobs all lie in the future is not a unit a claim visits, and a claim
-- does not walk future jobs to find due ones. Jobs due later wait in
-- jobs_scheduled_idx until a claim of their queue promotes them
-- (gaffer.claim_promote, in 0031). A node of an earlier build writes
-- jobs due (the default) whatever their run_at: the claim also checks
-- run_at, so they only cost it more reading.
ALTER TABLE gaffer.jobs ADD COLUMN IF NOT EXISTS due boolean NOT NULL DEFAULT true;
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_due_idx ON gaffer.jobs (queue, tenant COLLATE "C", fairness_key COLLATE "C", priority, run_at, id) INCLUDE (state)
    WHERE state IN ('pending', 'retrying') AND due;
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_scheduled_idx ON gaffer.jobs (queue, run_at)
    WHERE state IN ('pending', 'retrying') AND NOT due;
UPDATE gaffer.jobs SET due = false WHERE state IN ('pending', 'retrying') AND run_at > now() AND due;
