INSERT INTO jobs (queue, tenant, priority, state, payload)
SELECT 'q', 't', (random()*2)::int, 'pending', jsonb_build_object('n', g, 'pad', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')
FROM generate_series(1, 50) g;
