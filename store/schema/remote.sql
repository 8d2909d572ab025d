-- Remote workers (G11): processes in any language that claim, heartbeat
-- and finish jobs over HTTP under the same fenced leases as a node. Their
-- claim is gaffer.claim (claim.sql), as a node's; these release their attempts
-- and move them along. The statements that call them are in
-- store/queries/remote.sql.

-- release_node_jobs gives back every attempt running on the given nodes
-- or remote workers without using it up (the job is claimable again at
-- once, in its place in line; a job whose cancellation was asked for
-- ends cancelled), wakes
-- the queues' workers, and returns how many it released.
CREATE FUNCTION gaffer.release_node_jobs(node_ids text[], reason text) RETURNS integer
LANGUAGE sql AS $fn$
    WITH upd AS (
        UPDATE gaffer.jobs j
        SET state = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'pending' END,
            node = CASE WHEN j.cancel_requested THEN j.node END, -- a waiting job is on no node
            finalized_at = CASE WHEN j.cancel_requested THEN now() END,
            max_attempts = j.max_attempts + 1, uncounted_attempts = j.uncounted_attempts + 1,
            lease_expires_at = NULL, -- run_at kept: its place in line
            errors = gaffer.append_attempt_error(j.errors, jsonb_build_object(
                'attempt', j.attempt, 'at', now(), 'error', reason, 'kind', 'released', 'node', j.node))
        WHERE j.state = 'running' AND j.node = ANY (node_ids)
        RETURNING j.queue, j.state
    ), wake AS (
        SELECT pg_notify('gaffer_jobs', qs.q) FROM (SELECT DISTINCT u.queue AS q FROM upd u WHERE u.state = 'pending') qs
    )
    SELECT ((SELECT count(*) FROM upd) + 0 * (SELECT count(*) FROM wake))::integer
$fn$;

-- sweep_remote_workers moves remote workers along, by the database clock:
-- a drain order makes one draining; at its drain deadline its running
-- attempts are released; once it runs nothing while draining it has
-- drained and left; one not heard from for silent_ms is lost (its leases
-- expire and the lease rescuer runs its jobs again); a worker gone for
-- keep_ms is deleted. Every node runs it; the statements are idempotent
-- and row locks order concurrent sweeps. It returns what it did and how
-- many remote workers are live.
CREATE FUNCTION gaffer.sweep_remote_workers(silent_ms bigint, keep_ms bigint,
    OUT released integer, OUT drained integer, OUT lost integer, OUT live integer)
LANGUAGE plpgsql AS $fn$
DECLARE
    due text[];
BEGIN
    UPDATE gaffer.nodes SET state = 'draining'
    WHERE kind = 'remote' AND state = 'active' AND drain_requested_at IS NOT NULL;

    SELECT array_agg(nd.id) INTO due FROM gaffer.nodes nd
    WHERE nd.kind = 'remote' AND nd.state <> 'dead' AND nd.drain_deadline <= now();
    released := 0;
    IF due IS NOT NULL THEN
        released := gaffer.release_node_jobs(due, 'released: the remote worker was drained and its deadline passed');
    END IF;

    WITH upd AS (
        UPDATE gaffer.nodes nd
        SET state = 'dead', in_flight = 0, left_at = now(), left_reason = 'drained', drained_at = now()
        WHERE nd.kind = 'remote' AND nd.state <> 'dead' AND nd.drain_requested_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM gaffer.jobs j WHERE j.state = 'running' AND j.node = nd.id)
        RETURNING 1
    )
    SELECT count(*) INTO drained FROM upd;

    WITH upd AS (
        UPDATE gaffer.nodes nd
        SET state = 'dead', left_at = now(), left_reason = 'lost'
        WHERE nd.kind = 'remote' AND nd.state <> 'dead' AND nd.last_seen < now() - silent_ms * interval '1 millisecond'
        RETURNING 1
    )
    SELECT count(*) INTO lost FROM upd;

    DELETE FROM gaffer.nodes nd
    WHERE nd.kind = 'remote' AND nd.state = 'dead' AND nd.left_at < now() - keep_ms * interval '1 millisecond';

    SELECT count(*) INTO live FROM gaffer.nodes nd WHERE nd.kind = 'remote' AND nd.state <> 'dead';
END
$fn$;
