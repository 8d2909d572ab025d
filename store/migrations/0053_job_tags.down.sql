ALTER TABLE gaffer.jobs DROP COLUMN tags;
