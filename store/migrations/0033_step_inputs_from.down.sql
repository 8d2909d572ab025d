ALTER TABLE gaffer.jobs DROP COLUMN IF EXISTS inputs_from;
