-- Design A: jobs with partial claim index on pending rows
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
  claimed_at timestamptz          -- measurement only: set by the claim UPDATE (same row version), used for rows-claimed/s and backlog
);
CREATE INDEX jobs_claim_idx ON jobs (queue, tenant, priority, run_at, id) WHERE state = 'pending';
