-- A job holds a lease exactly while it runs. Batch writes for running
-- attempts test "lease_expires_at IS NOT NULL" rather than
-- "state = 'running'": equivalent under this constraint, and it keeps the
-- planner off jobs_running_idx (whose partial predicate is the state) for
-- statements that must find their rows through the primary key.
ALTER TABLE gaffer.jobs ADD CONSTRAINT jobs_lease_state_check
    CHECK ((state = 'running') = (lease_expires_at IS NOT NULL));
