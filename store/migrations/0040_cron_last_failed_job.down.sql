ALTER TABLE gaffer.cron_entries DROP COLUMN last_failed_job_id, DROP COLUMN last_failed_error, DROP COLUMN last_failed_at;
