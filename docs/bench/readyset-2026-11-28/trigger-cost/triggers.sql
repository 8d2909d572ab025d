-- Ready set kept in step with gaffer.jobs by statement-level AFTER triggers.
-- claimable := state IN ('pending','retrying') AND due
CREATE TABLE IF NOT EXISTS gaffer.ready (id bigint NOT NULL, queue text NOT NULL, tenant text NOT NULL, fairness_key text NOT NULL, priority smallint NOT NULL, run_at timestamptz NOT NULL, kind text NOT NULL);
CREATE INDEX IF NOT EXISTS ready_claim_idx ON gaffer.ready (queue, tenant, fairness_key, priority, run_at, id);
CREATE INDEX IF NOT EXISTS ready_id_idx ON gaffer.ready (id);

CREATE OR REPLACE FUNCTION gaffer.ready_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO gaffer.ready (id, queue, tenant, fairness_key, priority, run_at, kind)
  SELECT n.id, n.queue, n.tenant, n.fairness_key, n.priority, n.run_at, n.kind
  FROM n WHERE n.state IN ('pending','retrying') AND n.due;
  RETURN NULL;
END $$;

-- An update that keeps a row claimable but changes one of the ready columns
-- (queue, tenant, fairness_key, priority, run_at, kind) is handled as delete + insert,
-- so the ready row stays identical to the job's columns.
CREATE OR REPLACE FUNCTION gaffer.ready_upd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM gaffer.ready r
  USING o JOIN n ON n.id = o.id
  WHERE r.id = o.id
    AND o.state IN ('pending','retrying') AND o.due
    AND NOT (n.state IN ('pending','retrying') AND n.due
             AND (n.queue, n.tenant, n.fairness_key, n.priority, n.run_at, n.kind)
                 IS NOT DISTINCT FROM (o.queue, o.tenant, o.fairness_key, o.priority, o.run_at, o.kind));
  INSERT INTO gaffer.ready (id, queue, tenant, fairness_key, priority, run_at, kind)
  SELECT n.id, n.queue, n.tenant, n.fairness_key, n.priority, n.run_at, n.kind
  FROM n JOIN o ON o.id = n.id
  WHERE n.state IN ('pending','retrying') AND n.due
    AND NOT (o.state IN ('pending','retrying') AND o.due
             AND (n.queue, n.tenant, n.fairness_key, n.priority, n.run_at, n.kind)
                 IS NOT DISTINCT FROM (o.queue, o.tenant, o.fairness_key, o.priority, o.run_at, o.kind));
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION gaffer.ready_del() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM gaffer.ready r
  USING o
  WHERE r.id = o.id AND o.state IN ('pending','retrying') AND o.due;
  RETURN NULL;
END $$;

-- "with" variant: create triggers
CREATE OR REPLACE TRIGGER ready_ins AFTER INSERT ON gaffer.jobs
  REFERENCING NEW TABLE AS n FOR EACH STATEMENT EXECUTE FUNCTION gaffer.ready_ins();
CREATE OR REPLACE TRIGGER ready_upd AFTER UPDATE ON gaffer.jobs
  REFERENCING OLD TABLE AS o NEW TABLE AS n FOR EACH STATEMENT EXECUTE FUNCTION gaffer.ready_upd();
CREATE OR REPLACE TRIGGER ready_del AFTER DELETE ON gaffer.jobs
  REFERENCING OLD TABLE AS o FOR EACH STATEMENT EXECUTE FUNCTION gaffer.ready_del();

-- "without" variant (run instead of the block above; tables/functions stay):
-- DROP TRIGGER IF EXISTS ready_ins ON gaffer.jobs;
-- DROP TRIGGER IF EXISTS ready_upd ON gaffer.jobs;
-- DROP TRIGGER IF EXISTS ready_del ON gaffer.jobs;

-- reset between runs (outside a transaction):
-- DELETE FROM gaffer.jobs; TRUNCATE gaffer.ready; VACUUM ANALYZE gaffer.jobs; VACUUM ANALYZE gaffer.ready;
