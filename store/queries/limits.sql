-- Limits and tenant weights (store/schema/limits.sql).

-- name: upsert_limit
-- $1 name, $2 queue, $3 kind, $4 tenant, $5 key_from, $6 concurrency,
-- $7 rate, $8 period_ms, $9 burst; $10 owner: when not NULL, an existing
-- limit is replaced only if its tenant is $10 (a tenant's admin token
-- changes only its own tenant's limits), else nothing is written and no
-- row comes back. A changed key or rate starts the limit's buckets
-- afresh. Returns whether a limit was created.
WITH old AS (
    SELECT key_from, rate, period_ms, burst FROM gaffer.limits WHERE name = $1
), up AS (
    INSERT INTO gaffer.limits (name, queue, kind, tenant, key_from, concurrency, rate, period_ms, burst)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
    ON CONFLICT (name) DO UPDATE SET queue = excluded.queue, kind = excluded.kind, tenant = excluded.tenant,
        key_from = excluded.key_from, concurrency = excluded.concurrency, rate = excluded.rate,
        period_ms = excluded.period_ms, burst = excluded.burst, updated_at = now()
    WHERE $10::text IS NULL OR gaffer.limits.tenant = $10::text
    RETURNING name
), reset AS (
    DELETE FROM gaffer.limit_buckets b USING old
    WHERE b.limit_name = $1 AND (old.key_from, old.rate, old.period_ms, old.burst) IS DISTINCT FROM ($5, $7, $8, $9)
      AND EXISTS (SELECT 1 FROM up)
)
SELECT NOT EXISTS (SELECT 1 FROM old) FROM up;

-- name: delete_limit
-- $2 owner: when not NULL, only a limit whose tenant is $2 is deleted.
DELETE FROM gaffer.limits WHERE name = $1 AND ($2::text IS NULL OR tenant = $2::text) RETURNING name;

-- name: list_limits
SELECT name, coalesce(queue, ''), coalesce(kind, ''), coalesce(tenant, ''), key_from, coalesce(concurrency, 0),
       coalesce(rate, 0), coalesce(period_ms, 0), coalesce(burst, 0), created_at, updated_at
FROM gaffer.limits ORDER BY name;

-- name: limit_usage
-- Per limit: its busiest keys' running attempts (up to $1 keys each) and
-- the due, unclaimed jobs it matches (counted up to $2). Keys are bucket
-- keys (gaffer.limit_key_of), bounded in length.
SELECT l.name, coalesce(k.in_use, 0)::bigint, coalesce(k.busiest, 0)::bigint,
       (SELECT count(*) FROM (
           SELECT 1 FROM gaffer.jobs j
           WHERE j.state IN ('pending', 'retrying') AND j.due AND j.run_at <= now()
             AND (l.queue IS NULL OR j.queue = l.queue) AND (l.kind IS NULL OR j.kind = l.kind)
             AND (l.tenant IS NULL OR j.tenant = l.tenant)
           LIMIT $2) d)::bigint AS due,
       coalesce(k.keys, '[]')
FROM gaffer.limits l
LEFT JOIN LATERAL (
    SELECT sum(r.n) AS in_use, max(r.n) AS busiest,
           jsonb_agg(jsonb_build_object('key', r.key, 'running', r.n) ORDER BY r.n DESC, r.key) FILTER (WHERE r.rank <= $1) AS keys
    FROM (SELECT x.key, count(*) AS n, row_number() OVER (ORDER BY count(*) DESC, x.key) AS rank
          FROM (SELECT gaffer.limit_key_of(l.key_from, j.tenant, j.kind, j.queue, j.limit_key, j.fairness_key, j.args) AS key
                FROM gaffer.jobs j
                WHERE j.state = 'running' AND (l.queue IS NULL OR j.queue = l.queue) AND (l.kind IS NULL OR j.kind = l.kind)
                  AND (l.tenant IS NULL OR j.tenant = l.tenant)) x
          GROUP BY x.key) r
) k ON true
ORDER BY l.name;

-- name: set_tenant_weight
INSERT INTO gaffer.tenant_weights (tenant, weight) VALUES ($1, $2)
ON CONFLICT (tenant) DO UPDATE SET weight = excluded.weight, updated_at = now();

-- name: delete_tenant_weight
DELETE FROM gaffer.tenant_weights WHERE tenant = $1;

-- name: list_tenant_weights
SELECT tenant, weight FROM gaffer.tenant_weights ORDER BY tenant;
