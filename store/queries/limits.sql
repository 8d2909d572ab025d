-- Limits and tenant weights (migration 0015).

-- name: upsert_limit
-- $1 name, $2 queue, $3 kind, $4 tenant, $5 key_from, $6 concurrency,
-- $7 rate, $8 period_ms, $9 burst. A changed key or rate starts the
-- limit's buckets afresh. Returns whether a limit was created.
WITH old AS (
    SELECT key_from, rate, period_ms, burst FROM gaffer.limits WHERE name = $1
), up AS (
    INSERT INTO gaffer.limits (name, queue, kind, tenant, key_from, concurrency, rate, period_ms, burst)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
    ON CONFLICT (name) DO UPDATE SET queue = excluded.queue, kind = excluded.kind, tenant = excluded.tenant,
        key_from = excluded.key_from, concurrency = excluded.concurrency, rate = excluded.rate,
        period_ms = excluded.period_ms, burst = excluded.burst, updated_at = now()
    RETURNING name
), reset AS (
    DELETE FROM gaffer.limit_buckets b USING old
    WHERE b.limit_name = $1 AND (old.key_from, old.rate, old.period_ms, old.burst) IS DISTINCT FROM ($5, $7, $8, $9)
)
SELECT NOT EXISTS (SELECT 1 FROM old) FROM up;

-- name: delete_limit
DELETE FROM gaffer.limits WHERE name = $1 RETURNING name;

-- name: list_limits
SELECT name, coalesce(queue, ''), coalesce(kind, ''), coalesce(tenant, ''), key_from, coalesce(concurrency, 0),
       coalesce(rate, 0), coalesce(period_ms, 0), coalesce(burst, 0), created_at, updated_at
FROM gaffer.limits ORDER BY name;

-- name: limit_usage
-- Per limit: its busiest keys' running attempts (up to $1 keys each) and
-- the due, unclaimed jobs it matches (counted up to $2).
SELECT l.name,
       coalesce((SELECT sum(k.n) FROM (
           SELECT count(*) AS n FROM gaffer.jobs r
           WHERE r.state = 'running' AND gaffer.limit_applies(l, r)
           GROUP BY gaffer.limit_key(l.key_from, r)) k), 0)::bigint AS in_use,
       coalesce((SELECT max(k.n) FROM (
           SELECT count(*) AS n FROM gaffer.jobs r
           WHERE r.state = 'running' AND gaffer.limit_applies(l, r)
           GROUP BY gaffer.limit_key(l.key_from, r)) k), 0)::bigint AS busiest,
       (SELECT count(*) FROM (
           SELECT 1 FROM gaffer.jobs j
           WHERE j.state IN ('pending', 'retrying') AND j.run_at <= now() AND gaffer.limit_applies(l, j)
             AND (l.queue IS NULL OR j.queue = l.queue)
           LIMIT $2) d)::bigint AS due,
       coalesce((SELECT jsonb_agg(jsonb_build_object('key', k.key, 'running', k.n) ORDER BY k.n DESC, k.key) FROM (
           SELECT gaffer.limit_key(l.key_from, r) AS key, count(*) AS n FROM gaffer.jobs r
           WHERE r.state = 'running' AND gaffer.limit_applies(l, r)
           GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT $1) k), '[]') AS keys
FROM gaffer.limits l
ORDER BY l.name;

-- name: set_tenant_weight
INSERT INTO gaffer.tenant_weights (tenant, weight) VALUES ($1, $2)
ON CONFLICT (tenant) DO UPDATE SET weight = excluded.weight, updated_at = now();

-- name: delete_tenant_weight
DELETE FROM gaffer.tenant_weights WHERE tenant = $1;

-- name: list_tenant_weights
SELECT tenant, weight FROM gaffer.tenant_weights ORDER BY tenant;
