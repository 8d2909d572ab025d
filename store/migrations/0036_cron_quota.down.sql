ALTER TABLE gaffer.cron_entries DROP COLUMN min_gap_ms;
