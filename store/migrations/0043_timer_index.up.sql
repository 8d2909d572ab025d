-- gaffer:no-transaction
-- gaffer:expand
-- Workflow timers (gaffer.sleep and gaffer.signal jobs, the kinds Gaffer
-- keeps for itself) waiting in a queue, so that queue counts can leave
-- them out (issue 25: a workflow sleeping a week read as a pending job
-- nobody worked). Partial: it holds only Gaffer's own waiting jobs, so a
-- user's job never enters it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_timers_idx ON gaffer.jobs (queue) INCLUDE (state)
    WHERE state IN ('pending', 'retrying') AND kind LIKE 'gaffer.%';
