-- gaffer:expand
-- The side claim: a small claim of named fairness units that a node makes
-- while its claim of the queue is in flight, when a job of a unit that
-- claim does not serve is inserted (notified on gaffer_units). The due job
-- of a tenant with nothing else waiting then starts within milliseconds,
-- not after the claim in flight and the next one, however large another
-- tenant's backlog and however long its claims take. Nodes of the build
-- before it never call it.

-- claim_pick_units picks and locks up to n due jobs of the units
-- (u_tenant[i], u_fkey[i]) of queue q for node node_id, shared among them
-- by weight as a claim of the queue shares its slots (fair_take), each
-- unit's jobs in (priority, run_at, id) order from its start, and keeps
-- only what the limits allow (limit_admit). A paused queue or a draining
-- node gets none.
CREATE FUNCTION gaffer.claim_pick_units(q text, n integer, node_id text, u_tenant text[], u_fkey text[])
RETURNS bigint[]
LANGUAGE plpgsql AS $fn$
DECLARE
    ids bigint[];
    kinds text[];
    tenants text[];
BEGIN
    IF coalesce(cardinality(u_tenant), 0) = 0 OR cardinality(u_tenant) <> coalesce(cardinality(u_fkey), 0)
       OR EXISTS (SELECT 1 FROM gaffer.queues qq WHERE qq.name = q AND qq.paused)
       OR EXISTS (SELECT 1 FROM gaffer.nodes nd WHERE nd.id = node_id AND nd.drain_requested_at IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    SELECT array_agg(p.id), array_agg(DISTINCT p.kind), array_agg(DISTINCT p.tenant) INTO ids, kinds, tenants
    FROM gaffer.fair_take(q, n, u_tenant, u_fkey, '{}', '{}', '{}', '{}', '{}') p;
    IF ids IS NOT NULL AND EXISTS (
        SELECT 1 FROM gaffer.limits l
        WHERE (l.queue IS NULL OR l.queue = q) AND (l.tenant IS NULL OR l.tenant = ANY (tenants))
          AND (l.kind IS NULL OR l.kind = ANY (kinds))) THEN
        ids := gaffer.limit_admit(q, (SELECT array_agg(j) FROM gaffer.jobs j WHERE j.id = ANY (ids)));
    END IF;
    RETURN ids;
END
$fn$;
