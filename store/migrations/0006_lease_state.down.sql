ALTER TABLE gaffer.jobs DROP CONSTRAINT jobs_lease_state_check;
