-- gaffer:expand
-- Why a cron entry's work fails (docs/cron.md, "Status"): the last of its
-- jobs that ended failed (attempts exhausted, a permanent error, lost on
-- its last attempt), that job's last error and when it failed. Written by
-- the statements that fail a job; binaries of the release before leave
-- them as they are.
ALTER TABLE gaffer.cron_entries ADD COLUMN last_failed_job_id bigint,
    ADD COLUMN last_failed_error text,
    ADD COLUMN last_failed_at timestamptz;
