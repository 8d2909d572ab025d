-- gaffer:expand
-- Sequences (issue 26, item 1): jobs of one (tenant, sequence_key) run one
-- at a time in enqueue order. A job that must wait its turn is 'held':
-- no claim index holds that state, so no claim ever sees it, and a held
-- job becomes 'pending' when the job before it ends (the triggers of
-- store/schema/sequences.sql). sequence_halt: the job's failure halts
-- its sequence (on_failure halt) rather than letting the next one run.
-- Binaries of the release before never write either column, nor 'held';
-- they claim, finish, retry and rescue a sequence's jobs as any other,
-- and the triggers (migration 0052) do a sequence's part of it whoever
-- writes the row.
ALTER TABLE gaffer.jobs ADD COLUMN sequence_key text;
ALTER TABLE gaffer.jobs ADD COLUMN sequence_halt boolean NOT NULL DEFAULT false;
ALTER TABLE gaffer.jobs ADD CONSTRAINT jobs_sequence_key_check
    CHECK (octet_length(sequence_key) <= 255) NOT VALID;
-- 'held' joins the states: the check is widened (no row breaks it, and a
-- NOT VALID check binds every new row at once; validation reads the
-- table under a lock that lets writes on).
ALTER TABLE gaffer.jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE gaffer.jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('pending', 'running', 'retrying', 'completed', 'failed', 'cancelled', 'held')) NOT VALID;
ALTER TABLE gaffer.jobs VALIDATE CONSTRAINT jobs_state_check;

-- One row per sequence that has work or is halted: the job whose turn it
-- is (head: pending, running or retrying), or the failed job that halted
-- it (halted_by). Every change to a sequence locks its row; the row goes
-- when the sequence has nothing left.
CREATE TABLE gaffer.sequences (
    tenant     text        NOT NULL,
    key        text        NOT NULL,
    head       bigint,
    halted_by  bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    halted_at  timestamptz,
    PRIMARY KEY (tenant, key),
    CONSTRAINT sequences_key_check CHECK (octet_length(key) <= 255),
    CONSTRAINT sequences_head_check CHECK (head IS NULL OR halted_by IS NULL)
);
