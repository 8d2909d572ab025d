-- Retention of finished jobs, two designs side by side, on the real
-- gaffer.jobs schema (run `gaffer migrate` first). psql -v n=ROWS -f this.
-- Run by scripts/retention-compare.sh, which starts a throwaway server.
--
--   A. Today: finished rows are deleted in fenced batches of 5000, oldest
--      first (delete_finished_jobs), and autovacuum reclaims them.
--   B. Partitions: finished jobs live in time-range partitions, and a
--      day's retention is one DROP of the oldest partition. For finished
--      rows to land in their own partitions, completing a job must move
--      its row out of the live partition: an UPDATE across partitions,
--      which PostgreSQL runs as a DELETE plus an INSERT.
--
-- Each step prints its time (\timing) and the WAL it wrote.
\set ON_ERROR_STOP on
\timing on
SET synchronous_commit = on;

CREATE TEMP TABLE steps (step text, lsn pg_lsn, at timestamptz, end_lsn pg_lsn, end_at timestamptz);
CREATE PROCEDURE pg_temp.begin_step(s text) LANGUAGE sql AS
  $$ INSERT INTO steps (step, lsn, at) VALUES (s, pg_current_wal_lsn(), clock_timestamp()) $$;
CREATE PROCEDURE pg_temp.end_step() LANGUAGE sql AS
  $$ UPDATE steps SET end_lsn = pg_current_wal_lsn(), end_at = clock_timestamp() WHERE end_at IS NULL $$;

-- The batched delete, one transaction per batch, as the retention cleaner runs it.
CREATE PROCEDURE pg_temp.delete_batches(batch int) LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  LOOP
    WITH doomed AS (
        SELECT id FROM gaffer.jobs
        WHERE state IN ('completed', 'failed', 'cancelled') AND finalized_at < now() - interval '1 hour'
        ORDER BY finalized_at LIMIT batch FOR UPDATE SKIP LOCKED)
    DELETE FROM gaffer.jobs j USING doomed WHERE j.id = doomed.id;
    GET DIAGNOSTICS n = ROW_COUNT;
    COMMIT;
    EXIT WHEN n < batch;
  END LOOP;
END $$;

-- Completing running jobs 1000 at a time by id, as complete_jobs does.
CREATE PROCEDURE pg_temp.complete_all(tbl regclass) LANGUAGE plpgsql AS $$
DECLARE lo bigint; hi bigint;
BEGIN
  EXECUTE format('SELECT min(id), max(id) FROM %s', tbl) INTO lo, hi;
  WHILE lo <= hi LOOP
    EXECUTE format($q$UPDATE %s SET state = 'completed', finalized_at = now(), lease_expires_at = NULL
                     WHERE id >= $1 AND id < $1 + 1000 AND state = 'running'$q$, tbl) USING lo;
    COMMIT;
    lo := lo + 1000;
  END LOOP;
END $$;

\echo '== A. batched delete of :n finished jobs from gaffer.jobs'
INSERT INTO gaffer.jobs (kind, queue, state, attempt, run_at, created_at, attempted_at, finalized_at, args)
SELECT 'noop', 'exp', 'completed', 1, t, t, t, t, '{"t":1}'
FROM (SELECT now() - interval '2 days' + i * interval '1 millisecond' AS t FROM generate_series(1, :n) i) g;
VACUUM (ANALYZE) gaffer.jobs;
SELECT pg_size_pretty(pg_table_size('gaffer.jobs')) AS table, pg_size_pretty(pg_indexes_size('gaffer.jobs')) AS indexes;
CALL pg_temp.begin_step('delete');
CALL pg_temp.delete_batches(5000);
CALL pg_temp.end_step();
CALL pg_temp.begin_step('vacuum after delete');
VACUUM gaffer.jobs;
CALL pg_temp.end_step();
SELECT pg_size_pretty(pg_table_size('gaffer.jobs')) AS table_after, pg_size_pretty(pg_indexes_size('gaffer.jobs')) AS indexes_after;

\echo '== B1. completing :n running jobs in place (gaffer.jobs today)'
INSERT INTO gaffer.jobs (kind, queue, state, attempt, lease_token, lease_expires_at, node, args)
SELECT 'noop', 'exp', 'running', 1, 1, now() + interval '1 hour', 'n1', '{"t":1}' FROM generate_series(1, :n);
VACUUM (ANALYZE) gaffer.jobs;
CALL pg_temp.begin_step('complete in place');
CALL pg_temp.complete_all('gaffer.jobs');
CALL pg_temp.end_step();
CALL pg_temp.begin_step('vacuum after complete in place');
VACUUM gaffer.jobs;
CALL pg_temp.end_step();
DELETE FROM gaffer.jobs WHERE queue = 'exp';
VACUUM gaffer.jobs;

\echo '== B2. completing :n running jobs that move to a finished partition'
-- The same columns, constraints and indexes, partitioned by state: live
-- rows in one partition, finished ones in a finished partition (itself
-- split by time in a real design; one is enough to price the move).
CREATE TABLE exp_jobs (LIKE gaffer.jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY LIST (state);
CREATE TABLE exp_jobs_live PARTITION OF exp_jobs FOR VALUES IN ('pending', 'running', 'retrying') WITH (fillfactor = 85);
CREATE TABLE exp_jobs_done PARTITION OF exp_jobs FOR VALUES IN ('completed', 'failed', 'cancelled')
    PARTITION BY RANGE (finalized_at);
CREATE TABLE exp_jobs_done_today PARTITION OF exp_jobs_done FOR VALUES FROM ('-infinity') TO ('infinity');
-- Every index gaffer.jobs has, on the parent (so on each partition). No
-- primary key: a unique index on a partitioned table must hold every
-- partitioning column, and finalized_at is NULL until a job finishes, so
-- the best there is is a plain index on id (ids are no longer checked
-- unique, and neither are unique keys across partitions).
DO $$
DECLARE d text;
BEGIN
  FOR d IN SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'gaffer.jobs'::regclass AND NOT indisunique LOOP
    EXECUTE regexp_replace(regexp_replace(d, 'INDEX (\S+) ON gaffer\.jobs', 'INDEX exp_\1 ON exp_jobs'), 'ON exp_jobs USING', 'ON exp_jobs USING');
  END LOOP;
END $$;
CREATE INDEX exp_jobs_id ON exp_jobs (id);
INSERT INTO exp_jobs (id, kind, queue, state, attempt, lease_token, lease_expires_at, node, args)
SELECT i, 'noop', 'exp', 'running', 1, 1, now() + interval '1 hour', 'n1', '{"t":1}' FROM generate_series(1, :n) i;
VACUUM (ANALYZE) exp_jobs_live;
CALL pg_temp.begin_step('complete with a move');
CALL pg_temp.complete_all('exp_jobs');
CALL pg_temp.end_step();
CALL pg_temp.begin_step('vacuum after the move');
VACUUM exp_jobs_live;
CALL pg_temp.end_step();
CALL pg_temp.begin_step('drop partition');
DROP TABLE exp_jobs_done_today;
CALL pg_temp.end_step();

\echo '== WAL and time per step'
SELECT step, round(extract(epoch FROM end_at - at)::numeric, 2) AS seconds,
       round(:n / extract(epoch FROM end_at - at)::numeric) AS rows_per_sec,
       pg_size_pretty(end_lsn - lsn) AS wal, round(((end_lsn - lsn) / :n)::numeric) AS wal_bytes_per_row
FROM steps ORDER BY at;
DROP TABLE exp_jobs;
