ALTER TABLE gaffer.jobs DROP COLUMN IF EXISTS batch_id;
DROP TABLE IF EXISTS gaffer.batches;
