DROP INDEX gaffer.jobs_workflow_run_idx;
DROP INDEX gaffer.jobs_cron_entry_idx;

ALTER TABLE gaffer.cron_entries
    DROP CONSTRAINT cron_last_error_check,
    DROP CONSTRAINT cron_done_check;

-- The older schema needs a cursor on every entry and does not know
-- "@at": one-shot entries are kept, paused (a done one at the instant it
-- was done), for an operator to look at or delete.
UPDATE gaffer.cron_entries SET paused = true, next_run_at = coalesce(next_run_at, done_at)
WHERE next_run_at IS NULL OR schedule LIKE '@at%';

ALTER TABLE gaffer.cron_entries
    DROP COLUMN retry_at,
    DROP COLUMN consecutive_failures,
    DROP COLUMN last_error_at,
    DROP COLUMN last_error,
    DROP COLUMN last_occurrence_at,
    DROP COLUMN last_fired_at,
    DROP COLUMN done_at,
    ALTER COLUMN next_run_at SET NOT NULL;
