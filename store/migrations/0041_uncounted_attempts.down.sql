ALTER TABLE gaffer.jobs DROP COLUMN uncounted_attempts;
