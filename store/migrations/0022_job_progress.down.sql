ALTER TABLE gaffer.jobs
    DROP CONSTRAINT jobs_progress_check,
    DROP COLUMN progress_at,
    DROP COLUMN progress_attempt,
    DROP COLUMN progress_message,
    DROP COLUMN progress;
