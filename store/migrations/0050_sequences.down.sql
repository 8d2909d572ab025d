DROP TABLE gaffer.sequences;
UPDATE gaffer.jobs SET state = 'pending' WHERE state = 'held';
ALTER TABLE gaffer.jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE gaffer.jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('pending', 'running', 'retrying', 'completed', 'failed', 'cancelled'));
ALTER TABLE gaffer.jobs DROP CONSTRAINT jobs_sequence_key_check;
ALTER TABLE gaffer.jobs DROP COLUMN sequence_halt;
ALTER TABLE gaffer.jobs DROP COLUMN sequence_key;
