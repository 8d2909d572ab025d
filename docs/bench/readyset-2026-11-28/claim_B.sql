-- Same alternation as claim_A.sql. Claim: lock up to 50 candidates per ready table
-- (each ordered by the claim index), keep the best 50 overall, delete exactly those
-- ready rows (by ctid), mark the jobs running. Unpicked locked candidates are
-- released at commit (end of statement).
\if :phase = 0
WITH a AS (SELECT 0 AS t, ctid AS tid, id, priority, run_at FROM ready_0
           WHERE queue = 'q' AND tenant = 't' ORDER BY priority, run_at, id LIMIT 50 FOR UPDATE SKIP LOCKED),
     b AS (SELECT 1 AS t, ctid AS tid, id, priority, run_at FROM ready_1
           WHERE queue = 'q' AND tenant = 't' ORDER BY priority, run_at, id LIMIT 50 FOR UPDATE SKIP LOCKED),
     c AS (SELECT 2 AS t, ctid AS tid, id, priority, run_at FROM ready_2
           WHERE queue = 'q' AND tenant = 't' ORDER BY priority, run_at, id LIMIT 50 FOR UPDATE SKIP LOCKED),
     pick AS (SELECT t, tid, id FROM (SELECT * FROM a UNION ALL SELECT * FROM b UNION ALL SELECT * FROM c) u
              ORDER BY priority, run_at, id LIMIT 50),
     d0 AS (DELETE FROM ready_0 WHERE ctid = ANY(ARRAY(SELECT tid FROM pick WHERE t = 0)) RETURNING id),
     d1 AS (DELETE FROM ready_1 WHERE ctid = ANY(ARRAY(SELECT tid FROM pick WHERE t = 1)) RETURNING id),
     d2 AS (DELETE FROM ready_2 WHERE ctid = ANY(ARRAY(SELECT tid FROM pick WHERE t = 2)) RETURNING id),
     u AS (UPDATE jobs SET state = 'running', claimed_at = clock_timestamp()
           WHERE id IN (SELECT id FROM d0 UNION ALL SELECT id FROM d1 UNION ALL SELECT id FROM d2)
           RETURNING id)
SELECT coalesce(array_agg(id), '{}') AS ids FROM u \gset
\set phase 1
\else
UPDATE jobs SET state = 'completed' WHERE id = ANY(:ids);
\set phase 0
\endif
