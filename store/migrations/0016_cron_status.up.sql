-- Cron entries' status (last firing, last scheduler error, consecutive
-- failures), one-shot "@at" entries that end done, and indexes for
-- listing the jobs of one cron entry or one workflow run.

-- A done one-shot entry has no next occurrence: its cursor is NULL and
-- done_at says when it was done. Every other entry has a cursor.
ALTER TABLE gaffer.cron_entries
    ALTER COLUMN next_run_at DROP NOT NULL,
    ADD COLUMN done_at timestamptz,
    -- The last occurrence that made a job: when the leader fired it (the
    -- database clock) and the instant it was scheduled for. last_job_id
    -- (0003) is its job.
    ADD COLUMN last_fired_at timestamptz,
    ADD COLUMN last_occurrence_at timestamptz,
    -- The last error the scheduler met firing this entry, and how many
    -- firings in a row failed (0 once one succeeds). retry_at holds a
    -- failing entry back (backoff) so that it neither spins the scheduler
    -- nor holds up other entries; an edit clears it.
    ADD COLUMN last_error text,
    ADD COLUMN last_error_at timestamptz,
    ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0,
    ADD COLUMN retry_at timestamptz,
    ADD CONSTRAINT cron_done_check CHECK ((next_run_at IS NULL) = (done_at IS NOT NULL)),
    ADD CONSTRAINT cron_last_error_check CHECK (octet_length(last_error) <= 4096);

-- GET /v1/jobs?cron_entry= and ?workflow_run=, newest first: an index
-- range in id order, so a page costs its rows however many jobs the
-- table holds. Partial, so only cron and workflow jobs are in them, and
-- on columns no claim or completion changes: those updates stay HOT and
-- never touch these indexes. Building them reads the jobs table once,
-- holding off writes to it meanwhile (migrations run in one transaction).
CREATE INDEX jobs_cron_entry_idx ON gaffer.jobs (tenant, cron_entry, id) WHERE cron_entry IS NOT NULL;
CREATE INDEX jobs_workflow_run_idx ON gaffer.jobs (workflow_run, id) WHERE workflow_run IS NOT NULL;
