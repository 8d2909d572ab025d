-- Design B: jobs with pk only + three rotated narrow ready tables
DROP TABLE IF EXISTS jobs, ready_0, ready_1, ready_2, rotation, rotation_log CASCADE;
DROP PROCEDURE IF EXISTS rotate();
CREATE TABLE jobs (
  id bigserial PRIMARY KEY,
  queue text NOT NULL,
  tenant text NOT NULL,
  priority smallint NOT NULL,
  run_at timestamptz NOT NULL DEFAULT now(),
  state text NOT NULL,
  payload jsonb,
  claimed_at timestamptz          -- measurement only (see schema_A.sql)
);
CREATE TABLE ready_0 (id bigint NOT NULL, queue text NOT NULL, tenant text NOT NULL, priority smallint NOT NULL, run_at timestamptz NOT NULL);
CREATE TABLE ready_1 (LIKE ready_0);
CREATE TABLE ready_2 (LIKE ready_0);
CREATE INDEX ready_0_claim_idx ON ready_0 (queue, tenant, priority, run_at, id);
CREATE INDEX ready_1_claim_idx ON ready_1 (queue, tenant, priority, run_at, id);
CREATE INDEX ready_2_claim_idx ON ready_2 (queue, tenant, priority, run_at, id);
CREATE TABLE rotation (cur int NOT NULL);
INSERT INTO rotation VALUES (0);
-- one row per rotation step (measurement)
CREATE TABLE rotation_log (
  started timestamptz, lock_acquired timestamptz, finished timestamptz,
  new_cur int, truncated int, attempts int, lock_failures int, moved bigint);

-- Rotation step: advance cur (own transaction, so enqueuers switch at once), then
-- in a second transaction: LOCK the table two steps behind (ACCESS EXCLUSIVE,
-- session lock_timeout = 50ms, retried on timeout), move its remaining rows into
-- the current table, TRUNCATE it.
CREATE PROCEDURE rotate() LANGUAGE plpgsql AS $$
DECLARE
  c int; old int; t0 timestamptz; tl timestamptz; n_try int := 0; n_fail int := 0; n_moved bigint := 0;
BEGIN
  t0 := clock_timestamp();
  UPDATE rotation SET cur = (cur + 1) % 3 RETURNING cur INTO c;
  COMMIT;
  old := (c + 1) % 3;           -- = c - 2 mod 3: not written since two steps
  LOOP
    n_try := n_try + 1;
    BEGIN
      EXECUTE format('LOCK TABLE ready_%s IN ACCESS EXCLUSIVE MODE', old);
      tl := clock_timestamp();
      EXECUTE format('INSERT INTO ready_%s SELECT * FROM ready_%s', c, old);
      GET DIAGNOSTICS n_moved = ROW_COUNT;
      EXECUTE format('TRUNCATE ready_%s', old);
      EXIT;
    EXCEPTION WHEN lock_not_available THEN
      n_fail := n_fail + 1;     -- lock_timeout hit: subtransaction rolled back, retry
    END;
  END LOOP;
  INSERT INTO rotation_log VALUES (t0, tl, clock_timestamp(), c, old, n_try, n_fail, n_moved);
  COMMIT;
END $$;
