ALTER TABLE gaffer.jobs DROP COLUMN unique_window_key;
