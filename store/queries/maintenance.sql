-- Vacuum pacing (internal/maintenance/vacuumer.go). Every claim and
-- completion leaves a dead row version in gaffer.jobs, and a dead entry
-- in the claim index that the next claims walk until vacuum removes it;
-- autovacuum looks at a database once per autovacuum_naptime (1 minute
-- by default), so the leader also vacuums the table itself when the
-- dead rows gather.

-- name: jobs_dead_rows
-- The dead row versions the server's statistics count in gaffer.jobs
-- (what autovacuum's threshold is compared with).
SELECT coalesce(pg_stat_get_dead_tuples('gaffer.jobs'::regclass), 0);

-- name: may_vacuum_jobs
-- Whether this session's role may vacuum gaffer.jobs: PostgreSQL 15
-- lets a table's owner (or a member of the owner's role) and a
-- superuser do it, and skips the table with a warning for anyone else.
SELECT pg_has_role(current_user, c.relowner, 'USAGE') OR r.rolsuper
FROM pg_class c, pg_roles r
WHERE c.oid = 'gaffer.jobs'::regclass AND r.rolname = current_user;

-- name: blocks_anyone
-- Whether a session waits for a lock that backend $1 holds (or waits
-- for ahead of it).
SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid)))

-- name: vacuum_jobs_unless_busy
-- SKIP_LOCKED: when another vacuum (autovacuum's) holds the table, this
-- one returns at once instead of waiting for it.
VACUUM (SKIP_LOCKED) gaffer.jobs

-- name: xid_horizon
-- The oldest transaction id whose effects a vacuum of gaffer.jobs must
-- keep, as a 64-bit id (the next id to be assigned, less the age of the
-- oldest snapshot or running transaction that holds rows back): a row
-- deleted by a later transaction is dead to the statistics but not yet
-- removable. What holds it: this database's sessions (their snapshots
-- and their transactions), sessions attached to no database
-- (walsenders), replication slots and prepared transactions, as
-- PostgreSQL counts them; not vacuums, which it does not count either
-- (autovacuum workers, and a session whose query, where this role may
-- read it, is a VACUUM); nor this statement's own snapshot, whose xmin
-- a transaction in another database may hold back, as it does not hold
-- back a vacuum here.
WITH held AS (
    SELECT greatest(age(backend_xmin), age(backend_xid)) AS age
    FROM pg_stat_activity
    WHERE (datname = current_database() OR datid IS NULL)
      AND pid <> pg_backend_pid()
      AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
      AND backend_type <> 'autovacuum worker'
      AND coalesce(query, '') !~* '^\s*vacuum'
    UNION ALL
    SELECT age(xmin) FROM pg_replication_slots WHERE xmin IS NOT NULL
    UNION ALL
    SELECT age(transaction) FROM pg_prepared_xacts WHERE database = current_database()
)
SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint - coalesce(max(age), 0) FROM held
