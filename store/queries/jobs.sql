-- Job queries. Each query starts with a "-- name: <name>" line; {{job}}
-- expands to every job column and {{job:x}} to the same columns of alias x.
-- Every write that acts for a running attempt is compare-and-set on
-- (id, attempt, lease_token, running): a stale worker changes nothing.
-- "Running" is state = 'running', or, in batch statements,
-- lease_expires_at IS NOT NULL, which is the same (migration 0006).

-- name: insert_job
-- $1 tenant, $2 kind, $3 queue, $4 priority, $5 max_attempts,
-- $6 timeout_ms, $7 run_at (NULL = now), $8 delay_ms, $9 unique_key, $10 args,
-- $11 fairness_key, $12 limit_key, $13 traceparent, $14 tracestate, $15
-- sequence_key, $16 sequence_halt. A run_at in the past is clamped to
-- now: the claim orders by it, and nobody jumps the line. A job due later
-- waits in the scheduled index (due false) until a claim of its queue
-- promotes it. A job entering a sequence is held if it is not its turn
-- (the trigger sequence_enter); its wake is then for nothing.
WITH ins AS (
    INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, run_at, due, unique_key, args, fairness_key, limit_key,
                             traceparent, tracestate, sequence_key, sequence_halt)
    VALUES ($1, $2, $3, $4, $5, $6, greatest(coalesce($7, now()) + $8 * interval '1 millisecond', now()),
            coalesce($7, now()) + $8 * interval '1 millisecond' <= now(), $9, $10, $11, $12, $13, $14, $15, $16)
    ON CONFLICT (tenant, unique_key) WHERE unique_key IS NOT NULL AND state IN ('pending', 'running', 'retrying')
    DO NOTHING
    RETURNING {{job}}
), wake AS (
    -- The queue's claim loops, and (gaffer_units) the side claim for the
    -- job's fairness unit; nodes of the build before it hear the first.
    SELECT pg_notify('gaffer_jobs', queue), pg_notify('gaffer_units', concat_ws(E'\t', queue, tenant, fairness_key))
    FROM ins WHERE run_at <= now()
)
SELECT {{job:ins}}, (SELECT count(*) FROM wake) FROM ins;

-- name: insert_job_tagged
-- insert_job for a job with tags ($17, a non-empty text[]): the same
-- statement with the tags column, so that an enqueue without tags runs
-- insert_job unchanged.
WITH ins AS (
    INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, run_at, due, unique_key, args, fairness_key, limit_key,
                             traceparent, tracestate, sequence_key, sequence_halt, tags)
    VALUES ($1, $2, $3, $4, $5, $6, greatest(coalesce($7, now()) + $8 * interval '1 millisecond', now()),
            coalesce($7, now()) + $8 * interval '1 millisecond' <= now(), $9, $10, $11, $12, $13, $14, $15, $16, $17)
    ON CONFLICT (tenant, unique_key) WHERE unique_key IS NOT NULL AND state IN ('pending', 'running', 'retrying')
    DO NOTHING
    RETURNING {{job}}
), wake AS (
    SELECT pg_notify('gaffer_jobs', queue), pg_notify('gaffer_units', concat_ws(E'\t', queue, tenant, fairness_key))
    FROM ins WHERE run_at <= now()
)
SELECT {{job:ins}}, (SELECT count(*) FROM wake) FROM ins;

-- name: get_unfinished_by_unique_key
SELECT {{job}} FROM gaffer.jobs
WHERE tenant = $1 AND unique_key = $2 AND state IN ('pending', 'running', 'retrying');

-- name: lock_unique_window
-- Before insert_job_windowed, in its transaction, a statement of its own:
-- waits for any other enqueue of the key ($1 tenant, $2 key) to commit or
-- roll back, so that the next statement's snapshot (READ COMMITTED takes
-- one per statement) sees the job it made. One lock per key, held to the
-- end of the transaction, in a space of its own (two int4 keys; class
-- 'gaff'); a tenant name never holds '/', so tenant/key names one key. Two
-- keys that hash alike only wait for each other. Returns the
-- transaction's isolation: above READ COMMITTED the snapshot is the
-- transaction's first, and the caller refuses.
SELECT current_setting('transaction_isolation'), pg_advisory_xact_lock(1734436454, hashtext($1 || '/' || $2))::text;

-- name: insert_job_windowed
-- An enqueue with a uniqueness window, after lock_unique_window: the
-- newest job of the tenant enqueued with a window under the key ($9)
-- that holds it — in one of the states $15 (NULL: any) and enqueued
-- within the last $16 ms (NULL: whenever) — is returned (existing true);
-- else the job is inserted as insert_job does, its key in
-- unique_window_key. Parameters $1-$14 as insert_job's; $17 its tags
-- (NULL: none).
WITH holder AS (
    SELECT {{job}} FROM gaffer.jobs
    WHERE tenant = $1 AND unique_window_key = $9
      AND ($15::text[] IS NULL OR state = ANY($15::text[]))
      AND ($16::bigint IS NULL OR created_at > now() - $16 * interval '1 millisecond')
    ORDER BY id DESC
    LIMIT 1
), ins AS (
    INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, run_at, due, unique_window_key, args, fairness_key, limit_key,
                             traceparent, tracestate, tags)
    SELECT $1::text, $2::text, $3::text, $4::smallint, $5::integer, $6::bigint,
           greatest(coalesce($7::timestamptz, now()) + $8::bigint * interval '1 millisecond', now()),
           coalesce($7::timestamptz, now()) + $8::bigint * interval '1 millisecond' <= now(),
           $9::text, $10::json, $11::text, $12::text, $13::text, $14::text, $17::text[]
    WHERE NOT EXISTS (SELECT FROM holder)
    RETURNING {{job}}
), wake AS (
    SELECT pg_notify('gaffer_jobs', queue), pg_notify('gaffer_units', concat_ws(E'\t', queue, tenant, fairness_key))
    FROM ins WHERE run_at <= now()
)
SELECT {{job:ins}}, false, (SELECT count(*) FROM wake) FROM ins
UNION ALL
SELECT {{job:holder}}, true, 0 FROM holder;

-- name: insert_job_debounced
-- An enqueue with debounce: $1 tenant, $2 kind, $3 queue, $4 priority,
-- $5 max_attempts, $6 timeout_ms, $7 args, $8 fairness_key, $9
-- limit_key, $10 traceparent, $11 tracestate, $12 debounce key, $13
-- window ms, $14 max_wait ms (NULL: no cap), $15 tags (NULL: none; a
-- job keeps the tags of the enqueue that made it). While a job of the tenant
-- with the key has not started (jobs_debounce_idx: pending, attempt 0),
-- this enqueue updates it instead — its args become $7 and its run_at now + window, but never
-- past its debounce_until (its first enqueue + max_wait) nor before now —
-- and returns it with debounced true. Atomic: ON CONFLICT locks that job;
-- if a claim started it meanwhile, the insert is tried again and makes a
-- new job. A moved run_at in the future sets due false, so that the job
-- waits in jobs_scheduled_idx and no claim takes it early; a claim
-- promotes it when its time comes (claim_promote).
WITH ins AS (
    INSERT INTO gaffer.jobs AS j (tenant, kind, queue, priority, max_attempts, timeout_ms, run_at, due, args, fairness_key, limit_key,
                             traceparent, tracestate, debounce_key, debounce_until, tags)
    VALUES ($1, $2, $3, $4, $5, $6, least(now() + $13 * interval '1 millisecond', now() + $14 * interval '1 millisecond'),
            $13 <= 0, $7, $8, $9, $10, $11, $12, now() + $14 * interval '1 millisecond', $15::text[])
    ON CONFLICT (tenant, debounce_key) WHERE debounce_key IS NOT NULL AND state = 'pending' AND attempt = 0
    DO UPDATE SET args = EXCLUDED.args,
        run_at = greatest(least(now() + $13 * interval '1 millisecond', j.debounce_until), now()),
        due = greatest(least(now() + $13 * interval '1 millisecond', j.debounce_until), now()) <= now()
    RETURNING {{job}}, xmax <> 0 AS debounced
), wake AS (
    SELECT pg_notify('gaffer_jobs', queue), pg_notify('gaffer_units', concat_ws(E'\t', queue, tenant, fairness_key))
    FROM ins WHERE run_at <= now()
)
SELECT {{job:ins}}, ins.debounced, (SELECT count(*) FROM wake) FROM ins;

-- name: notify_queues
-- $1 queues with due jobs; $2-$4 the fairness units (queues, tenants,
-- fairness keys) of those jobs, for side claims (empty: none).
SELECT pg_notify('gaffer_jobs', q) FROM unnest($1::text[]) AS q
UNION ALL
SELECT pg_notify('gaffer_units', concat_ws(E'\t', u.q, u.t, u.k)) FROM unnest($2::text[], $3::text[], $4::text[]) AS u(q, t, k);

-- name: insert_jobs_unnest
-- Many jobs in one statement, for batches that carry unique keys (COPY
-- cannot skip conflicts). Returns the ordinal of each inserted row.
INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, run_at, due, unique_key, args, fairness_key, limit_key,
                         traceparent, tracestate, sequence_key, sequence_halt)
SELECT tenant, kind, queue, priority, max_attempts, timeout_ms, greatest(coalesce(run_at, now()) + delay_ms * interval '1 millisecond', now()),
       coalesce(run_at, now()) + delay_ms * interval '1 millisecond' <= now(), unique_key, args, fairness_key, limit_key, traceparent, tracestate,
       sequence_key, sequence_halt
FROM unnest($1::text[], $2::text[], $3::text[], $4::smallint[], $5::integer[], $6::bigint[], $7::timestamptz[], $8::bigint[], $9::text[], $10::json[],
            $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::boolean[])
    WITH ORDINALITY AS r(tenant, kind, queue, priority, max_attempts, timeout_ms, run_at, delay_ms, unique_key, args, fairness_key, limit_key,
                         traceparent, tracestate, sequence_key, sequence_halt, ord)
ORDER BY ord
ON CONFLICT (tenant, unique_key) WHERE unique_key IS NOT NULL AND state IN ('pending', 'running', 'retrying')
DO NOTHING
RETURNING id, tenant, unique_key;

-- name: insert_jobs_unnest_tagged
-- insert_jobs_unnest for a batch with tags: $17 each job's tags joined by
-- ',' (a tag never holds one; NULL: none).
INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, run_at, due, unique_key, args, fairness_key, limit_key,
                         traceparent, tracestate, sequence_key, sequence_halt, tags)
SELECT tenant, kind, queue, priority, max_attempts, timeout_ms, greatest(coalesce(run_at, now()) + delay_ms * interval '1 millisecond', now()),
       coalesce(run_at, now()) + delay_ms * interval '1 millisecond' <= now(), unique_key, args, fairness_key, limit_key, traceparent, tracestate,
       sequence_key, sequence_halt, string_to_array(tags, ',')
FROM unnest($1::text[], $2::text[], $3::text[], $4::smallint[], $5::integer[], $6::bigint[], $7::timestamptz[], $8::bigint[], $9::text[], $10::json[],
            $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::boolean[], $17::text[])
    WITH ORDINALITY AS r(tenant, kind, queue, priority, max_attempts, timeout_ms, run_at, delay_ms, unique_key, args, fairness_key, limit_key,
                         traceparent, tracestate, sequence_key, sequence_halt, tags, ord)
ORDER BY ord
ON CONFLICT (tenant, unique_key) WHERE unique_key IS NOT NULL AND state IN ('pending', 'running', 'retrying')
DO NOTHING
RETURNING id, tenant, unique_key;

-- name: claim_promote
-- Before a claim, in its transaction: the queue's scheduled jobs whose
-- run_at has come become due, for the claim to take
-- (gaffer.claim_promote, store/schema/claim.sql).
SELECT gaffer.claim_promote($1);

-- name: claim_jobs
-- The claim, for every claim path: gaffer.claim_ready (store/schema/
-- claim.sql) picks and locks the jobs, fairly among the queue's units
-- and within the limits; this statement starts them, each a new attempt
-- under this lease, and deletes their ready rows (ready.sql). Then one
-- trailer row (id 0): where the caller's next claim starts among the
-- units, whether a limit being changed kept the claim from claiming
-- (busy), whether a limit refused any job it weighed (a short claim may
-- have left due jobs). $1 queue, $2 limit, $3 lease token, $4 lease ms,
-- $5 node or remote worker, $6 a remote worker's claim, $7 its tenant
-- (NULL: any), $8 its kinds (NULL: any), $9-$10 a side claim's units
-- (NULL: the queue's), $11-$15 each unit's cursor (tenants, fairness
-- keys, priorities, run_ats, ids), $16-$17 where the last claim stopped
-- (NULL: the top), $18-$19 the units the last claim served, $20 the
-- side claims' grace in ms.
WITH pick AS MATERIALIZED (
    SELECT * FROM gaffer.claim_ready($1, $2, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
), started AS (
    UPDATE gaffer.jobs j
    SET state = 'running', attempt = j.attempt + 1, lease_token = $3,
        lease_expires_at = now() + $4 * interval '1 millisecond', node = $5, attempted_at = pick.started_at
    FROM pick CROSS JOIN unnest(pick.ids) AS picked(id)
    WHERE j.id = picked.id
    RETURNING {{job:j}}
), left_ready AS MATERIALIZED (
    -- The started jobs' ready rows, deleted once the update is done. A
    -- job picked that this update did not see (committed after the
    -- statement began) is not started, and keeps its row.
    SELECT gaffer.ready_leave(pick.took_slot, pick.took_at, (SELECT array_agg(s.id) FROM started s)) FROM pick
)
SELECT s.*, NULL::text, NULL::text, NULL::boolean, NULL::boolean FROM started s
UNION ALL
SELECT {{job:zero}}, pick.next_tenant, pick.next_fkey, pick.busy,
       coalesce(current_setting('gaffer.claim_refused', true) = 'on', false)
FROM pick, left_ready;

-- name: complete_jobs
-- $1 ids, $2 attempts, $3 tokens, $4 results (NULL for none)
UPDATE gaffer.jobs j
SET state = 'completed', finalized_at = now(), result = c.result, lease_expires_at = NULL
FROM unnest($1::bigint[], $2::integer[], $3::bigint[], $4::json[]) AS c(id, attempt, token, result)
WHERE j.id = c.id AND j.attempt = c.attempt AND j.lease_token = c.token
  AND j.lease_expires_at IS NOT NULL -- running (jobs_lease_state_check); see migration 0006
RETURNING j.id;

-- name: fail_job
-- $1 id, $2 attempt, $3 token, $4 retry delay ms, $5 permanent,
-- $6 error message, $7 error kind, $8 stack (NULL for none)
-- A job whose cancellation was requested ends cancelled instead.
WITH upd AS (
    UPDATE gaffer.jobs
    SET state = CASE WHEN cancel_requested THEN 'cancelled'
                     WHEN $5 OR attempt >= max_attempts THEN 'failed'
                     ELSE 'retrying' END,
        run_at = CASE WHEN cancel_requested OR $5 OR attempt >= max_attempts THEN run_at
                      ELSE now() + $4 * interval '1 millisecond' END,
        due = $4 <= 0, -- a retry after a backoff waits in the scheduled index
        finalized_at = CASE WHEN cancel_requested OR $5 OR attempt >= max_attempts THEN now() END,
        node = CASE WHEN cancel_requested OR $5 OR attempt >= max_attempts THEN node END, -- a waiting job is on no node
        lease_expires_at = NULL,
        errors = gaffer.append_attempt_error(errors, jsonb_strip_nulls(jsonb_build_object(
            'attempt', attempt, 'at', now(), 'error', $6::text, 'kind', $7::text, 'node', node, 'stack', $8::text)))
    WHERE id = $1 AND attempt = $2 AND lease_token = $3 AND state = 'running'
    RETURNING *
), dead AS (
    INSERT INTO gaffer.dlq (tenant, job_id, kind, queue, priority, max_attempts, attempts, timeout_ms, args, errors, reason, workflow_run, step,
                            fairness_key, limit_key)
    SELECT tenant, id, kind, queue, priority, max_attempts - uncounted_attempts, attempt - uncounted_attempts, timeout_ms, args, errors,
           CASE WHEN $5 THEN 'permanent' ELSE 'exhausted' END, workflow_run, step, fairness_key, limit_key
    FROM upd WHERE state = 'failed'
), cron_failed AS (
    -- A cron entry's job that failed: the entry says why (its status).
    UPDATE gaffer.cron_entries ce
    SET last_failed_job_id = u.id, last_failed_error = $6::text, last_failed_at = now()
    FROM upd u
    WHERE u.state = 'failed' AND u.cron_entry IS NOT NULL AND ce.tenant = u.tenant AND ce.name = u.cron_entry
)
SELECT state, run_at FROM upd;

-- name: snooze_job
-- $1 id, $2 attempt, $3 token, $4 delay ms. A snooze does not use up an
-- attempt: max_attempts grows by one.
UPDATE gaffer.jobs
SET state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'pending' END,
    finalized_at = CASE WHEN cancel_requested THEN now() END,
    run_at = now() + $4 * interval '1 millisecond',
    due = $4 <= 0,
    max_attempts = max_attempts + 1, uncounted_attempts = uncounted_attempts + 1,
    node = CASE WHEN cancel_requested THEN node END,
    lease_expires_at = NULL
WHERE id = $1 AND attempt = $2 AND lease_token = $3 AND state = 'running'
RETURNING state, run_at;

-- name: cancel_running_job
-- The job's own attempt ends it cancelled: $1 id, $2 attempt, $3 token, $4 reason.
UPDATE gaffer.jobs
SET state = 'cancelled', finalized_at = now(), lease_expires_at = NULL,
    errors = gaffer.append_attempt_error(errors, jsonb_build_object(
        'attempt', attempt, 'at', now(), 'error', $4::text, 'kind', 'cancelled', 'node', node))
WHERE id = $1 AND attempt = $2 AND lease_token = $3 AND state = 'running'
RETURNING id;

-- name: heartbeat_jobs
-- $1 ids, $2 attempts, $3 tokens, $4 lease ms. Touches only the lease, so
-- it is a HOT update.
UPDATE gaffer.jobs j
SET lease_expires_at = now() + $4 * interval '1 millisecond'
FROM unnest($1::bigint[], $2::integer[], $3::bigint[]) AS h(id, attempt, token)
WHERE j.id = h.id AND j.attempt = h.attempt AND j.lease_token = h.token
  AND j.lease_expires_at IS NOT NULL -- running; see complete_jobs
RETURNING j.id, j.cancel_requested;

-- name: release_jobs
-- Give running attempts back without using them up: the job is claimable
-- again at once, in its place in line (its run_at, which has passed, is
-- kept), and the queue's workers are woken. $1 ids, $2 attempts, $3
-- tokens, $4 reason.
WITH upd AS (
    UPDATE gaffer.jobs j
    SET state = CASE WHEN j.cancel_requested THEN 'cancelled' ELSE 'pending' END,
        finalized_at = CASE WHEN j.cancel_requested THEN now() END,
        max_attempts = j.max_attempts + 1, uncounted_attempts = j.uncounted_attempts + 1, lease_expires_at = NULL,
        node = CASE WHEN j.cancel_requested THEN j.node END,
        errors = gaffer.append_attempt_error(j.errors, jsonb_build_object(
            'attempt', j.attempt, 'at', now(), 'error', $4::text, 'kind', 'released', 'node', j.node))
    FROM unnest($1::bigint[], $2::integer[], $3::bigint[]) AS r(id, attempt, token)
    WHERE j.id = r.id AND j.attempt = r.attempt AND j.lease_token = r.token
      AND j.lease_expires_at IS NOT NULL -- running; see complete_jobs
    RETURNING j.id, j.queue, j.state
), wake AS (
    SELECT pg_notify('gaffer_jobs', q) FROM (SELECT DISTINCT queue AS q FROM upd WHERE state = 'pending') qs
)
SELECT id, (SELECT count(*) FROM wake) FROM upd;

-- name: lost_claims
-- The attempts claims of node $1 with lease tokens $2 started and it may
-- never have heard of (the connection broke after a claim was sent).
SELECT id, attempt, lease_token FROM gaffer.jobs
WHERE state = 'running' AND node = $1 AND lease_token = ANY ($2::bigint[]);

-- name: cancel_requested_among
SELECT id FROM gaffer.jobs WHERE id = ANY($1::bigint[]) AND cancel_requested;

-- name: rescue_jobs
-- Running attempts whose lease expired (or, when $2 is set, that ran on
-- node $2) are ended as lost: the job retries at once, in its place in
-- line (its run_at, which has passed, is kept: a node's crash does not
-- send its jobs behind the backlog that came after them), or goes to the
-- DLQ on its last attempt, or is cancelled if that was requested.
-- $1 limit, $2 node (NULL: lease expiry only), $3 reason.
WITH lost AS (
    SELECT id, node FROM gaffer.jobs
    WHERE state = 'running' AND (lease_expires_at < now() OR node = $2)
    ORDER BY id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE gaffer.jobs j
    SET state = CASE WHEN j.cancel_requested THEN 'cancelled'
                     WHEN j.attempt >= j.max_attempts THEN 'failed'
                     ELSE 'retrying' END,
        finalized_at = CASE WHEN j.cancel_requested OR j.attempt >= j.max_attempts THEN now() END,
        node = CASE WHEN j.cancel_requested OR j.attempt >= j.max_attempts THEN j.node END,
        lease_expires_at = NULL,
        errors = gaffer.append_attempt_error(j.errors, jsonb_build_object(
            'attempt', j.attempt, 'at', now(), 'error', $3::text, 'kind', 'lost', 'node', j.node))
    FROM lost
    WHERE j.id = lost.id
    RETURNING j.*
), dead AS (
    INSERT INTO gaffer.dlq (tenant, job_id, kind, queue, priority, max_attempts, attempts, timeout_ms, args, errors, reason, workflow_run, step,
                            fairness_key, limit_key)
    SELECT tenant, id, kind, queue, priority, max_attempts - uncounted_attempts, attempt - uncounted_attempts, timeout_ms, args, errors, 'lost', workflow_run, step, fairness_key, limit_key
    FROM upd WHERE state = 'failed'
), cron_failed_jobs AS (
    -- Per cron entry, the last of its jobs this rescue failed.
    SELECT DISTINCT ON (u.tenant, u.cron_entry) u.tenant, u.cron_entry, u.id
    FROM upd u WHERE u.state = 'failed' AND u.cron_entry IS NOT NULL
    ORDER BY u.tenant, u.cron_entry, u.id DESC
), cron_locked AS (
    -- Their entries locked in one order: every node's rescuer sweeps at
    -- once, and two rescues that locked two entries in opposite orders
    -- would deadlock.
    SELECT ce.tenant, ce.name FROM gaffer.cron_entries ce
    JOIN cron_failed_jobs f ON ce.tenant = f.tenant AND ce.name = f.cron_entry
    ORDER BY ce.tenant, ce.name
    FOR UPDATE OF ce
), cron_failed AS (
    UPDATE gaffer.cron_entries ce
    SET last_failed_job_id = f.id, last_failed_error = $3::text, last_failed_at = now()
    FROM cron_locked l JOIN cron_failed_jobs f ON f.tenant = l.tenant AND f.cron_entry = l.name
    WHERE ce.tenant = l.tenant AND ce.name = l.name
), wake AS (
    SELECT pg_notify('gaffer_jobs', q) FROM (SELECT DISTINCT queue AS q FROM upd WHERE state = 'retrying') qs
)
SELECT u.id, u.queue, u.kind, u.state, l.node, (SELECT count(*) FROM wake) FROM upd u JOIN lost l ON l.id = u.id;

-- name: request_cancel
-- A pending, held or retrying job is cancelled at once; a running one is
-- marked and its node told. Returns the state after the request.
WITH upd AS (
    UPDATE gaffer.jobs
    SET state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END,
        finalized_at = CASE WHEN state = 'running' THEN finalized_at ELSE now() END,
        cancel_requested = true
    WHERE id = $1 AND ($2::text IS NULL OR tenant = $2) AND state IN ('pending', 'held', 'retrying', 'running')
    RETURNING id, state, node
), tell AS (
    SELECT pg_notify('gaffer_control', json_build_object('op', 'cancel', 'id', id, 'node', node)::text)
    FROM upd WHERE state = 'running'
)
SELECT state, (SELECT count(*) FROM tell) FROM upd;

-- name: get_job
-- With the last progress an attempt reported (migration 0018), and the
-- key of a job enqueued with a uniqueness window (0045), and a debounced
-- job's key and latest due time (0047).
SELECT {{job}}, progress, progress_message, progress_attempt, progress_at, unique_window_key, debounce_key, debounce_until
FROM gaffer.jobs WHERE id = $1 AND ($2::text IS NULL OR tenant = $2);

-- name: delete_finished_jobs
-- Retention: $1 age ms, $2 batch size. A failed job that halted its
-- sequence is kept while the sequence stays halted: deleting it would
-- resume the sequence (sequence_left).
WITH doomed AS (
    SELECT id FROM gaffer.jobs
    WHERE state IN ('completed', 'failed', 'cancelled') AND finalized_at < now() - $1 * interval '1 millisecond'
      AND id NOT IN (SELECT halted_by FROM gaffer.sequences WHERE halted_by IS NOT NULL)
    ORDER BY finalized_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM gaffer.jobs j USING doomed WHERE j.id = doomed.id;

-- name: retry_now
-- A retrying job waiting out its backoff becomes due at once.
WITH upd AS (
    UPDATE gaffer.jobs SET run_at = now(), due = true
    WHERE id = $1 AND ($2::text IS NULL OR tenant = $2) AND state = 'retrying'
    RETURNING queue
)
SELECT pg_notify('gaffer_jobs', queue) FROM upd;
