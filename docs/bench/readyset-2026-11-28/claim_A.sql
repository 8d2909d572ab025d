-- One pgbench "transaction" is either a claim or a completion, alternating per client
-- (variable :phase persists across transactions of a client). Even tx numbers = claim.
\if :phase = 0
WITH c AS (
  UPDATE jobs SET state = 'running', claimed_at = clock_timestamp()
  WHERE id IN (SELECT id FROM jobs
               WHERE state = 'pending' AND queue = 'q' AND tenant = 't'
               ORDER BY priority, run_at, id
               LIMIT 50 FOR UPDATE SKIP LOCKED)
  RETURNING id)
SELECT coalesce(array_agg(id), '{}') AS ids FROM c \gset
\set phase 1
\else
UPDATE jobs SET state = 'completed' WHERE id = ANY(:ids);
\set phase 0
\endif
