-- gaffer:expand
-- Side claims without the race (0027_side_claim): a claim of the queue
-- that starts between a job's insert and the side claim its notification
-- asks for would take the job itself, and the job would wait for that
-- claim to end after all. claim_pick now takes the units the caller's
-- last claim served (k_tenant, k_fkey) and a grace (grace_ms): while one
-- of those units is among the queue's, a unit outside them whose due jobs
-- are all younger than the grace is left out of the claim, for the side
-- claim to take. A job its side claim misses (no free slot, no LISTEN, a
-- job that came due by its run_at rather than by an insert) waits the
-- grace at most, then is claimed as before. The signature of the build
-- before it stays, with a grace of 0: nodes of that build claim as they
-- did.

CREATE FUNCTION gaffer.claim_pick(q text, n integer, node_id text,
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[],
    after_tenant text, after_fkey text, k_tenant text[], k_fkey text[], grace_ms integer)
RETURNS bigint[]
LANGUAGE plpgsql AS $fn$
DECLARE
    u_tenant text[];
    u_fkey text[];
    ids bigint[];
    kinds text[];
    tenants text[];
    limited boolean;
    cp smallint;
    cr timestamptz;
    ci bigint;
BEGIN
    SELECT fu.u_tenant, fu.u_fkey INTO u_tenant, u_fkey FROM gaffer.fair_units(q, n, node_id, after_tenant, after_fkey) fu;
    IF u_tenant IS NULL THEN
        RETURN NULL;
    END IF;
    -- While a unit the caller's last claim served (k_*) is among those
    -- found, a unit it did not serve whose due jobs are all fresh (due
    -- less than grace_ms ago) is left to the caller's side claim.
    IF grace_ms > 0 AND cardinality(u_tenant) > 1 AND EXISTS (
        SELECT 1 FROM unnest(u_tenant, u_fkey) AS u(t, k) JOIN unnest(k_tenant, k_fkey) AS kn(t, k) ON kn.t = u.t AND kn.k = u.k) THEN
        SELECT array_agg(u.t ORDER BY u.ord), array_agg(u.k ORDER BY u.ord) INTO u_tenant, u_fkey
        FROM unnest(u_tenant, u_fkey) WITH ORDINALITY AS u(t, k, ord)
        -- (CASE: a served unit is never probed, its range beginning with
        -- the dead entries of the claims that served it. A scalar probe
        -- ordered as the claim index is, not EXISTS: the generic plan of
        -- an EXISTS may scan the table instead.)
        WHERE CASE WHEN EXISTS (SELECT 1 FROM unnest(k_tenant, k_fkey) AS kn(t, k) WHERE kn.t = u.t AND kn.k = u.k) THEN true
                   ELSE (SELECT j.id FROM gaffer.jobs j
                         WHERE j.state IN ('pending', 'retrying') AND j.queue = q
                           AND j.tenant COLLATE "C" = u.t AND j.fairness_key COLLATE "C" = u.k
                           AND j.run_at <= now() - grace_ms * interval '1 millisecond'
                         ORDER BY j.priority, j.run_at, j.id LIMIT 1) IS NOT NULL END;
    END IF;
    IF cardinality(u_tenant) = 1 THEN
        SELECT c.prio, c.run_at, c.id INTO cp, cr, ci
        FROM unnest(c_tenant, c_fkey, c_prio, c_run_at, c_id) AS c(tenant, fkey, prio, run_at, id)
        WHERE c.tenant = u_tenant[1] AND c.fkey = u_fkey[1];
        SELECT array_agg(x.id), array_agg(DISTINCT x.kind) INTO ids, kinds FROM (
            SELECT j.id, j.kind FROM gaffer.jobs j
            WHERE j.state IN ('pending', 'retrying') AND j.queue = q
              AND j.tenant COLLATE "C" = u_tenant[1] AND j.fairness_key COLLATE "C" = u_fkey[1]
              AND j.run_at <= now()
              AND (j.priority, j.run_at, j.id) > (coalesce(cp, -1::smallint), coalesce(cr, '-infinity'::timestamptz), coalesce(ci, 0::bigint))
            ORDER BY j.priority, j.run_at, j.id
            LIMIT n
            FOR UPDATE SKIP LOCKED) x;
        -- Do the limits apply to these jobs? Decided on the kinds taken,
        -- without a second look at the rows: the default http-per-host
        -- limit costs a queue of other kinds nothing.
        limited := EXISTS (
            SELECT 1 FROM gaffer.limits l
            WHERE (l.queue IS NULL OR l.queue = q) AND (l.tenant IS NULL OR l.tenant = u_tenant[1])
              AND (l.kind IS NULL OR l.kind = ANY (kinds)));
    ELSE
        SELECT array_agg(p.id), array_agg(DISTINCT p.kind), array_agg(DISTINCT p.tenant) INTO ids, kinds, tenants
        FROM gaffer.fair_take(q, n, u_tenant, u_fkey, c_tenant, c_fkey, c_prio, c_run_at, c_id) p;
        limited := EXISTS (
            SELECT 1 FROM gaffer.limits l
            WHERE (l.queue IS NULL OR l.queue = q) AND (l.tenant IS NULL OR l.tenant = ANY (tenants))
              AND (l.kind IS NULL OR l.kind = ANY (kinds)));
    END IF;
    IF limited THEN
        ids := gaffer.limit_admit(q, (SELECT array_agg(j) FROM gaffer.jobs j WHERE j.id = ANY (ids)));
    END IF;
    RETURN ids;
END
$fn$;

-- The signature nodes of the build before call.
CREATE OR REPLACE FUNCTION gaffer.claim_pick(q text, n integer, node_id text,
    c_tenant text[], c_fkey text[], c_prio smallint[], c_run_at timestamptz[], c_id bigint[],
    after_tenant text, after_fkey text)
RETURNS bigint[]
LANGUAGE sql AS $fn$
    SELECT gaffer.claim_pick(q, n, node_id, c_tenant, c_fkey, c_prio, c_run_at, c_id, after_tenant, after_fkey,
                             NULL::text[], NULL::text[], 0)
$fn$;
