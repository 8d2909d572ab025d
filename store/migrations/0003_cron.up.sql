-- Cron entries, their occurrence history, and the occurrence key on jobs.

ALTER TABLE gaffer.jobs ADD COLUMN cron_entry text, ADD COLUMN cron_at timestamptz;

-- One job per occurrence (tenant, entry, scheduled instant): a second
-- insert of the same occurrence is a no-op.
CREATE UNIQUE INDEX jobs_cron_occurrence_idx ON gaffer.jobs (tenant, cron_entry, cron_at)
    WHERE cron_entry IS NOT NULL;

CREATE TABLE gaffer.cron_entries (
    tenant      text        NOT NULL,
    name        text        NOT NULL,
    schedule    text        NOT NULL,
    timezone    text        NOT NULL DEFAULT 'UTC',
    -- The job each occurrence enqueues: kind, queue, args, priority,
    -- max_attempts, timeout_ms.
    job         jsonb       NOT NULL,
    missed      text        NOT NULL DEFAULT 'skip',
    missed_cap  integer     NOT NULL DEFAULT 100,
    overlap     text        NOT NULL DEFAULT 'allow',
    paused      boolean     NOT NULL DEFAULT false,
    -- The cursor: the next scheduled instant not yet handled.
    next_run_at timestamptz NOT NULL,
    last_job_id bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, name),
    CONSTRAINT cron_missed_check CHECK (missed IN ('skip', 'once', 'all')),
    CONSTRAINT cron_missed_cap_check CHECK (missed_cap BETWEEN 1 AND 10000),
    CONSTRAINT cron_overlap_check CHECK (overlap IN ('allow', 'skip'))
);

CREATE INDEX cron_entries_due_idx ON gaffer.cron_entries (next_run_at) WHERE NOT paused;

CREATE TABLE gaffer.cron_occurrences (
    tenant       text        NOT NULL,
    entry        text        NOT NULL,
    scheduled_at timestamptz NOT NULL,
    -- fired, skipped (overlap), missed (missed-fire policy), triggered (by hand)
    status       text        NOT NULL,
    reason       text,
    -- A "missed" row may stand for several consecutive occurrences.
    count        integer     NOT NULL DEFAULT 1,
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    epoch        bigint,
    job_id       bigint,
    PRIMARY KEY (tenant, entry, scheduled_at),
    CONSTRAINT cron_occurrence_status_check CHECK (status IN ('fired', 'skipped', 'missed', 'triggered'))
);

CREATE INDEX cron_occurrences_recorded_idx ON gaffer.cron_occurrences (recorded_at);
