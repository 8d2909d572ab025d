-- EXPLORATORY v2 (not the briefed SQL): same semantics as triggers.sql, but
--  * each statement is run with EXECUTE, so it is planned at every firing with the
--    transition tables' real row counts (plpgsql otherwise caches one generic plan
--    per session, made at the first firing);
--  * gaffer.ready is reached only as id = ANY(ARRAY(subquery over o/n)), with
--    enable_seqscan=off on the function, so it is probed through ready_id_idx
--    whatever gaffer.ready's (possibly stale, "empty") statistics say.
CREATE OR REPLACE FUNCTION gaffer.ready_ins() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE $q$INSERT INTO gaffer.ready (id, queue, tenant, fairness_key, priority, run_at, kind)
  SELECT n.id, n.queue, n.tenant, n.fairness_key, n.priority, n.run_at, n.kind
  FROM n WHERE n.state IN ('pending','retrying') AND n.due$q$;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION gaffer.ready_upd() RETURNS trigger LANGUAGE plpgsql
SET enable_seqscan = off AS $$
BEGIN
  EXECUTE $q$DELETE FROM gaffer.ready r WHERE r.id = ANY (ARRAY(
    SELECT o.id FROM o JOIN n ON n.id = o.id
    WHERE o.state IN ('pending','retrying') AND o.due
      AND NOT (n.state IN ('pending','retrying') AND n.due
               AND (n.queue, n.tenant, n.fairness_key, n.priority, n.run_at, n.kind)
                   IS NOT DISTINCT FROM (o.queue, o.tenant, o.fairness_key, o.priority, o.run_at, o.kind))))$q$;
  EXECUTE $q$INSERT INTO gaffer.ready (id, queue, tenant, fairness_key, priority, run_at, kind)
  SELECT n.id, n.queue, n.tenant, n.fairness_key, n.priority, n.run_at, n.kind
  FROM n JOIN o ON o.id = n.id
  WHERE n.state IN ('pending','retrying') AND n.due
    AND NOT (o.state IN ('pending','retrying') AND o.due
             AND (n.queue, n.tenant, n.fairness_key, n.priority, n.run_at, n.kind)
                 IS NOT DISTINCT FROM (o.queue, o.tenant, o.fairness_key, o.priority, o.run_at, o.kind))$q$;
  RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION gaffer.ready_del() RETURNS trigger LANGUAGE plpgsql
SET enable_seqscan = off AS $$
BEGIN
  EXECUTE $q$DELETE FROM gaffer.ready r WHERE r.id = ANY (ARRAY(
    SELECT o.id FROM o WHERE o.state IN ('pending','retrying') AND o.due))$q$;
  RETURN NULL;
END $$;

CREATE OR REPLACE TRIGGER ready_ins AFTER INSERT ON gaffer.jobs
  REFERENCING NEW TABLE AS n FOR EACH STATEMENT EXECUTE FUNCTION gaffer.ready_ins();
CREATE OR REPLACE TRIGGER ready_upd AFTER UPDATE ON gaffer.jobs
  REFERENCING OLD TABLE AS o NEW TABLE AS n FOR EACH STATEMENT EXECUTE FUNCTION gaffer.ready_upd();
CREATE OR REPLACE TRIGGER ready_del AFTER DELETE ON gaffer.jobs
  REFERENCING OLD TABLE AS o FOR EACH STATEMENT EXECUTE FUNCTION gaffer.ready_del();
