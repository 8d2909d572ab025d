-- gaffer:expand
-- Fills the ready set (0062, 0063) with the jobs claimable now that have
-- no row in it yet: those written before 0063's triggers. Writes to
-- gaffer.jobs wait while it runs (the lock), so that no job changes
-- between its read and its insert; reads and claims' reads go on. Jobs
-- made claimable since 0063 have their row already, from the triggers.
LOCK TABLE gaffer.jobs IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO gaffer.ready (slot, queue, tenant, fairness_key, priority, run_at, id, kind)
SELECT (SELECT g.cur FROM gaffer.ready_ring g), j.queue, j.tenant, j.fairness_key, j.priority, j.run_at, j.id, j.kind
FROM gaffer.jobs j
WHERE j.state IN ('pending', 'retrying') AND j.due
  AND NOT EXISTS (SELECT 1 FROM gaffer.ready r
                  WHERE r.queue = j.queue AND r.tenant COLLATE "C" = j.tenant AND r.fairness_key COLLATE "C" = j.fairness_key
                    AND r.priority = j.priority AND r.run_at = j.run_at AND r.id = j.id);
