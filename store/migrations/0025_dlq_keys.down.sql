ALTER TABLE gaffer.dlq DROP COLUMN fairness_key, DROP COLUMN limit_key;
