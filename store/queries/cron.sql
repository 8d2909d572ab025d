-- Cron queries. Every change to an entry notifies gaffer_cron, which wakes
-- the leader's scheduler.

-- name: insert_cron_entry
WITH ins AS (
    INSERT INTO gaffer.cron_entries (tenant, name, schedule, timezone, job, missed, missed_cap, overlap, paused, next_run_at, min_gap_ms)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
    ON CONFLICT (tenant, name) DO NOTHING
    RETURNING tenant, name
), tell AS (
    SELECT pg_notify('gaffer_cron', tenant || '/' || name) FROM ins
)
SELECT (SELECT count(*) FROM tell) FROM ins;

-- name: update_cron_entry
-- Replaces every field; $10 is the new cursor, $11 when the entry was
-- done (both set: one is NULL), $12 the schedule's shortest gap (NULL:
-- unchanged). An edit clears a failing entry's backoff:
-- the scheduler tries the edited entry at once.
WITH upd AS (
    UPDATE gaffer.cron_entries
    SET schedule = $3, timezone = $4, job = $5, missed = $6, missed_cap = $7, overlap = $8, paused = $9,
        next_run_at = $10, done_at = $11, min_gap_ms = coalesce($12, min_gap_ms), retry_at = NULL, updated_at = now()
    WHERE tenant = $1 AND name = $2
    RETURNING tenant, name
), tell AS (
    SELECT pg_notify('gaffer_cron', tenant || '/' || name) FROM upd
)
SELECT (SELECT count(*) FROM tell) FROM upd;

-- name: delete_cron_entry
WITH del AS (
    DELETE FROM gaffer.cron_entries WHERE tenant = $1 AND name = $2 RETURNING tenant, name
), tell AS (
    SELECT pg_notify('gaffer_cron', tenant || '/' || name) FROM del
)
SELECT (SELECT count(*) FROM tell) FROM del;

-- name: get_cron_entry
SELECT tenant, name, schedule, timezone, job, missed, missed_cap, overlap, paused, next_run_at, last_job_id,
       created_at, updated_at, done_at, last_fired_at, last_occurrence_at, last_error, last_error_at,
       consecutive_failures, retry_at, (SELECT state FROM gaffer.jobs WHERE id = last_job_id),
       last_failed_job_id, last_failed_error, last_failed_at
FROM gaffer.cron_entries
WHERE tenant = $1 AND name = $2;

-- name: get_cron_entry_for_update
-- The same, locking the row until the caller's transaction ends: an edit
-- reads and writes the entry with no other edit or firing in between.
SELECT tenant, name, schedule, timezone, job, missed, missed_cap, overlap, paused, next_run_at, last_job_id,
       created_at, updated_at, done_at, last_fired_at, last_occurrence_at, last_error, last_error_at,
       consecutive_failures, retry_at, (SELECT state FROM gaffer.jobs WHERE id = last_job_id),
       last_failed_job_id, last_failed_error, last_failed_at
FROM gaffer.cron_entries
WHERE tenant = $1 AND name = $2
FOR UPDATE;

-- name: list_cron_entries
-- $1 tenant (NULL: all), $2 and $3 the cursor: the tenant and name of
-- the previous page's last entry (NULL: from the start), $4 limit.
SELECT tenant, name, schedule, timezone, job, missed, missed_cap, overlap, paused, next_run_at, last_job_id,
       created_at, updated_at, done_at, last_fired_at, last_occurrence_at, last_error, last_error_at,
       consecutive_failures, retry_at, (SELECT state FROM gaffer.jobs WHERE id = last_job_id),
       last_failed_job_id, last_failed_error, last_failed_at
FROM gaffer.cron_entries
WHERE ($1::text IS NULL OR tenant = $1) AND ($3::text IS NULL OR (tenant, name) > ($2::text, $3::text))
ORDER BY tenant, name
LIMIT $4;

-- name: due_cron_entries
-- Entries whose cursor has passed, by the database clock, and that clock;
-- not those a failure holds back until retry_at, nor those of the tenants
-- in $2 (whose fire budget is spent). Round-robin by tenant: each
-- tenant's earliest due entry first (earliest of those first), then each
-- tenant's second, and so on — so a tenant with hundreds of due entries
-- delays another tenant's entry by at most one turn, never by its whole
-- backlog. The turns are dealt among the $3 earliest due entries (read
-- from cron_entries_due_idx, keys only), so a read costs the same
-- whatever the backlog; past $3 due entries the rest wait their turn
-- earliest first.
SELECT e.tenant, e.name, e.schedule, e.timezone, e.job, e.missed, e.missed_cap, e.overlap, e.paused, e.next_run_at, e.last_job_id,
       e.created_at, e.updated_at, e.done_at, e.last_fired_at, e.last_occurrence_at, e.last_error, e.last_error_at,
       e.consecutive_failures, e.retry_at, (SELECT state FROM gaffer.jobs WHERE id = e.last_job_id),
       e.last_failed_job_id, e.last_failed_error, e.last_failed_at, now()
FROM (
    -- Keys only, until the $1 entries are chosen: then their rows.
    SELECT tenant, name, next_run_at, turn
    FROM (
        SELECT tenant, name, next_run_at, row_number() OVER (PARTITION BY tenant ORDER BY next_run_at, name) AS turn
        FROM (
            SELECT tenant, name, next_run_at
            FROM gaffer.cron_entries
            WHERE NOT paused AND next_run_at <= now() AND (retry_at IS NULL OR retry_at <= now())
              AND tenant <> ALL ($2::text[])
            ORDER BY next_run_at
            LIMIT $3
        ) earliest
    ) ranked
    ORDER BY turn, next_run_at, tenant
    LIMIT $1
) dealt
JOIN gaffer.cron_entries e ON e.tenant = dealt.tenant AND e.name = dealt.name
ORDER BY dealt.turn, dealt.next_run_at, dealt.tenant;

-- name: next_cron_due
-- Milliseconds until the earliest cursor, or the end of a failing entry's
-- backoff when later (negative: overdue); NULL if none. Done entries have
-- no cursor and count for nothing; nor do the tenants in $1 (whose fire
-- budget is spent: the scheduler knows when it refills).
SELECT (extract(epoch FROM min(greatest(next_run_at, retry_at)) - now()) * 1000)::bigint
FROM gaffer.cron_entries
WHERE NOT paused AND next_run_at IS NOT NULL AND tenant <> ALL ($1::text[]);

-- name: db_now
SELECT now();

-- name: cron_last_job_unfinished
SELECT EXISTS (
    SELECT 1 FROM gaffer.jobs j JOIN gaffer.cron_entries e ON j.id = e.last_job_id
    WHERE e.tenant = $1 AND e.name = $2 AND j.state IN ('pending', 'running', 'retrying')
);

-- name: insert_cron_jobs
-- One job per occurrence instant; an instant that already has its job is
-- skipped (the occurrence key is unique). $1 tenant, $2 entry, $3 instants,
-- $4 kind, $5 queue, $6 priority, $7 max_attempts, $8 timeout_ms, $9 args.
WITH ins AS (
    INSERT INTO gaffer.jobs (tenant, kind, queue, priority, max_attempts, timeout_ms, args, cron_entry, cron_at)
    SELECT $1, $4, $5, $6, $7, $8, $9, $2, at FROM unnest($3::timestamptz[]) AS at
    ON CONFLICT (tenant, cron_entry, cron_at) WHERE cron_entry IS NOT NULL DO NOTHING
    RETURNING id, cron_at, queue
), wake AS (
    SELECT pg_notify('gaffer_jobs', q) FROM (SELECT DISTINCT queue AS q FROM ins) qs
)
SELECT id, cron_at, (SELECT count(*) FROM wake) FROM ins;

-- name: insert_cron_occurrences
-- $1 tenant, $2 entry, then parallel arrays: $3 instants, $4 statuses,
-- $5 reasons, $6 counts, $7 job ids. The epoch is the fence's, read in
-- the leader's fenced transaction.
INSERT INTO gaffer.cron_occurrences (tenant, entry, scheduled_at, status, reason, count, epoch, job_id)
SELECT $1, $2, o.at, o.status, o.reason, o.count, (SELECT epoch FROM gaffer.leader_fence), o.job_id
FROM unnest($3::timestamptz[], $4::text[], $5::text[], $6::integer[], $7::bigint[]) AS o(at, status, reason, count, job_id)
ON CONFLICT (tenant, entry, scheduled_at) DO NOTHING;

-- name: advance_cron_cursor
-- Compare-and-set on the old cursor: a concurrent change (an edit, a
-- pause, another evaluation) makes it a no-op and the firing rolls back.
-- $4 the new cursor, NULL when a one-shot entry is done; $5 the last job
-- made and $6 its occurrence's instant (NULL: no job made). A firing
-- that commits ends a run of failures.
UPDATE gaffer.cron_entries
SET next_run_at = $4, done_at = CASE WHEN $4::timestamptz IS NULL THEN now() END,
    last_job_id = coalesce($5, last_job_id),
    last_fired_at = CASE WHEN $5::bigint IS NULL THEN last_fired_at ELSE now() END,
    last_occurrence_at = coalesce($6, last_occurrence_at),
    consecutive_failures = 0, retry_at = NULL, updated_at = now()
WHERE tenant = $1 AND name = $2 AND next_run_at = $3 AND NOT paused
RETURNING name;

-- name: record_cron_error
-- The scheduler could not fire the entry: keep the error and hold the
-- entry back, 1s after the first failure doubling to at most 5 minutes.
-- A no-op if the entry changed since the scheduler read it ($3, its
-- updated_at): the error was about a version that no longer exists.
UPDATE gaffer.cron_entries
SET last_error = $4, last_error_at = now(), consecutive_failures = consecutive_failures + 1,
    retry_at = now() + least(interval '1 second' * power(2, least(consecutive_failures, 16)), interval '5 minutes')
WHERE tenant = $1 AND name = $2 AND updated_at = $3
RETURNING consecutive_failures;

-- name: record_cron_edit_occurrences
-- Occurrences an edit decided (an old schedule's due instants the edit
-- replaced, a one-shot resumed past its time under skip): recorded with
-- no epoch, for no leader made them. $3-$6 as in insert_cron_occurrences.
INSERT INTO gaffer.cron_occurrences (tenant, entry, scheduled_at, status, reason, count)
SELECT $1, $2, o.at, o.status, o.reason, o.count
FROM unnest($3::timestamptz[], $4::text[], $5::text[], $6::integer[]) AS o(at, status, reason, count)
ON CONFLICT (tenant, entry, scheduled_at) DO NOTHING;

-- name: json_equal
-- Whether two JSON texts hold the same value, as jsonb compares them.
SELECT $1::jsonb = $2::jsonb;

-- name: cron_history
-- $1 tenant, $2 entry, $3 before (cursor, NULL: newest), $4 limit.
SELECT scheduled_at, status, coalesce(reason, ''), count, recorded_at, coalesce(epoch, 0), coalesce(job_id, 0)
FROM gaffer.cron_occurrences
WHERE tenant = $1 AND entry = $2 AND ($3::timestamptz IS NULL OR scheduled_at < $3)
ORDER BY scheduled_at DESC
LIMIT $4;

-- name: delete_old_cron_occurrences
WITH doomed AS (
    SELECT tenant, entry, scheduled_at FROM gaffer.cron_occurrences
    WHERE recorded_at < now() - $1 * interval '1 millisecond'
    ORDER BY recorded_at
    LIMIT $2
)
DELETE FROM gaffer.cron_occurrences o USING doomed
WHERE o.tenant = doomed.tenant AND o.entry = doomed.entry AND o.scheduled_at = doomed.scheduled_at;

-- name: lock_cron_quota
-- Serializes the edits of one tenant's entries that a quota checks ($1
-- the tenant), until the transaction ends: two creates cannot both fit
-- in the last free place. Taken before any entry's row lock.
SELECT pg_advisory_xact_lock(hashtextextended('gaffer.cron_quota/' || $1, 0));

-- name: cron_tenant_load
-- The tenant's entries other than $2, and the fires per minute they may
-- make at their fastest (60000 / min_gap_ms each; done one-shots and
-- one-shots make none). Entries written before min_gap_ms existed
-- (NULL) are not in the sum: cron_unmeasured lists them.
SELECT count(*), coalesce(sum(60000.0 / min_gap_ms) FILTER (WHERE min_gap_ms > 0 AND done_at IS NULL), 0)::float8
FROM gaffer.cron_entries
WHERE tenant = $1 AND name <> $2;

-- name: cron_unmeasured
SELECT name, schedule, timezone
FROM gaffer.cron_entries
WHERE tenant = $1 AND name <> $2 AND min_gap_ms IS NULL AND done_at IS NULL;

-- name: set_cron_min_gap
-- Records an older entry's measured gap, unless it changed meanwhile.
UPDATE gaffer.cron_entries
SET min_gap_ms = $5
WHERE tenant = $1 AND name = $2 AND schedule = $3 AND timezone = $4 AND min_gap_ms IS NULL;
