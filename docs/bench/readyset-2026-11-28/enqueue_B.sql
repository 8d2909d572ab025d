SELECT cur FROM rotation \gset
\if :cur = 0
WITH j AS (INSERT INTO jobs (queue, tenant, priority, state, payload)
  SELECT 'q', 't', (random()*2)::int, 'pending', jsonb_build_object('n', g, 'pad', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')
  FROM generate_series(1, 50) g RETURNING id, queue, tenant, priority, run_at)
INSERT INTO ready_0 SELECT * FROM j;
\elif :cur = 1
WITH j AS (INSERT INTO jobs (queue, tenant, priority, state, payload)
  SELECT 'q', 't', (random()*2)::int, 'pending', jsonb_build_object('n', g, 'pad', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')
  FROM generate_series(1, 50) g RETURNING id, queue, tenant, priority, run_at)
INSERT INTO ready_1 SELECT * FROM j;
\else
WITH j AS (INSERT INTO jobs (queue, tenant, priority, state, payload)
  SELECT 'q', 't', (random()*2)::int, 'pending', jsonb_build_object('n', g, 'pad', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')
  FROM generate_series(1, 50) g RETURNING id, queue, tenant, priority, run_at)
INSERT INTO ready_2 SELECT * FROM j;
\endif
