ALTER TABLE gaffer.jobs DROP COLUMN debounce_until;
ALTER TABLE gaffer.jobs DROP COLUMN debounce_key;
