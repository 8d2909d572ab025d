DROP TABLE gaffer.cron_occurrences;
DROP TABLE gaffer.cron_entries;
DROP INDEX gaffer.jobs_cron_occurrence_idx;
ALTER TABLE gaffer.jobs DROP COLUMN cron_at, DROP COLUMN cron_entry;
