DROP FUNCTION gaffer.claim_pick(text, integer, text, text[], text[], smallint[], timestamptz[], bigint[], text, text);
DROP FUNCTION gaffer.limit_admit(text, gaffer.jobs[]);
DROP FUNCTION gaffer.fair_units(text, integer, text, text, text);
DROP FUNCTION gaffer.queue_units(text, integer);
DROP FUNCTION gaffer.fair_take(text, integer, text[], text[], text[], text[], smallint[], timestamptz[], bigint[]);
DROP FUNCTION gaffer.limit_applies(gaffer.limits, gaffer.jobs);
DROP FUNCTION gaffer.limit_key(text, gaffer.jobs);
DROP TABLE gaffer.limit_buckets;
DROP TABLE gaffer.limits;
DROP TABLE gaffer.tenant_weights;
CREATE INDEX jobs_claim_queue_idx ON gaffer.jobs (queue, priority, run_at, id) INCLUDE (state)
    WHERE state IN ('pending', 'retrying');
DROP INDEX gaffer.jobs_claim_idx;
ALTER INDEX gaffer.jobs_claim_queue_idx RENAME TO jobs_claim_idx;
ALTER TABLE gaffer.jobs DROP COLUMN limit_key;
ALTER TABLE gaffer.jobs DROP COLUMN fairness_key;
