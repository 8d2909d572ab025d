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

-- name: jobs_lock_wanted
-- Whether a session waits for a lock on gaffer.jobs that a vacuum's lock
-- (SHARE UPDATE EXCLUSIVE) keeps from it: DDL, LOCK TABLE, a manual
-- ANALYZE or CREATE INDEX CONCURRENTLY. Asked while a vacuum of the table
-- runs, it is that vacuum that is in the way. It names no session, so
-- that it holds behind a transaction-mode pooler, where a client does not
-- know its server session's pid.
SELECT EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'relation' AND relation = 'gaffer.jobs'::regclass AND NOT granted
      AND mode IN ('ShareUpdateExclusiveLock', 'ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
)

-- name: vacuum_jobs_unless_busy
-- SKIP_LOCKED: when another vacuum (autovacuum's) holds the table, this
-- one returns at once instead of waiting for it. PARALLEL 0: one
-- process, as autovacuum's, rather than a worker per index beside the
-- claims (bench backlog measured the difference).
VACUUM (SKIP_LOCKED, PARALLEL 0) gaffer.jobs

-- name: horizon_holder
-- The oldest transaction id whose effects a vacuum of gaffer.jobs must
-- keep, as a 64-bit id (the next id to be assigned, less the age of the
-- oldest snapshot or running transaction that holds rows back), and what
-- holds it there, if anything does: a row deleted by a later transaction
-- is dead to the statistics but not yet removable. What holds it, as
-- PostgreSQL counts it: this database's sessions (their snapshots and
-- their transactions), walsenders attached to no database (a standby's
-- hot_standby_feedback), replication slots and prepared transactions.
-- Not the other processes attached to no database: the autovacuum
-- launcher takes a snapshot now and then to list the databases, and
-- its xmin, which a transaction in another database may hold back,
-- holds nothing here. Not vacuums, which
-- PostgreSQL does not count either: autovacuum workers, and sessions
-- whose query is a VACUUM, where this role may see them (a role without
-- pg_read_all_stats sees other roles' sessions' xmin but not what they
-- run, and counts them). Nor this statement's own snapshot, whose xmin a
-- transaction in another database may hold back, as it does not hold
-- back a vacuum here.
--
-- Ages are counted from the snapshot's xmax, in 32-bit modular
-- arithmetic (an xid is 32 bits, its 64-bit value is that xmax's less
-- the age), so that the horizon read twice with nothing released is the
-- same number; age() counts from the next id to be assigned, which
-- moves with every transaction anywhere. An xid at or past xmax (a
-- transaction begun after the snapshot) holds nothing back from it.
--
-- The holder's columns are NULL when nothing holds the horizon, and
-- those PostgreSQL hides from this role (another role's session's
-- state, start and address without pg_read_all_stats) are NULL too:
-- kind ('session', 'replication slot', 'prepared transaction'), pid, the
-- role, a name (the session's application_name, the slot's name, the
-- prepared transaction's gid), the client's address, the session's
-- state, and how long ago, by the database's clock, its transaction (or
-- the prepared one) began, in seconds.
WITH next AS (
    SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS id
), held AS (
    SELECT x.xid::text::bigint AS xid, 'session' AS kind, a.pid, a.usename::text AS role, a.application_name AS name,
           host(a.client_addr) AS client, a.state, a.xact_start AS since
    FROM pg_stat_activity a, LATERAL (VALUES (a.backend_xmin), (a.backend_xid)) AS x(xid)
    WHERE (a.datname = current_database() OR a.datid IS NULL AND a.backend_type = 'walsender')
      AND a.pid <> pg_backend_pid()
      AND x.xid IS NOT NULL
      AND a.backend_type IS DISTINCT FROM 'autovacuum worker'
      AND coalesce(a.query, '') !~* '^\s*vacuum'
    UNION ALL
    SELECT xmin::text::bigint, 'replication slot', active_pid, NULL, slot_name::text, NULL, NULL, NULL
    FROM pg_replication_slots WHERE xmin IS NOT NULL
    UNION ALL
    SELECT transaction::text::bigint, 'prepared transaction', NULL, owner::text, gid, NULL, NULL, prepared
    FROM pg_prepared_xacts WHERE database = current_database()
), oldest AS (
    SELECT * FROM (
        SELECT held.*, (next.id % 4294967296 - held.xid + 4294967296) % 4294967296 AS age FROM next, held
    ) aged
    WHERE age < 2147483648
    ORDER BY age DESC
    LIMIT 1
)
SELECT next.id - coalesce(o.age, 0), o.kind, o.pid, o.role, o.name, o.client, o.state,
       extract(epoch FROM now() - o.since)::float8
FROM next LEFT JOIN oldest o ON true

-- name: ready_rotate
-- One turn of the ready set's ring (store/schema/ready.sql), in a
-- transaction of its own: $1 the most rows a slot may hold to be moved
-- and emptied, $2 how long to wait for the slot's lock, in ms.
SELECT r.turned, r.moved, coalesce(r.why, '') FROM gaffer.ready_rotate($1, $2) r;
