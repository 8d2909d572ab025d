-- gaffer:expand
-- The ready set's tables (store/schema/tables.sql): gaffer.ready, a ring
-- of three partitions of one row per claimable job, and gaffer.ready_ring,
-- the slot rows enter. Nothing reads or writes them until the next
-- migration, 0063, which writes the triggers that keep the set and the
-- claim that reads it, and fills it with the jobs claimable then.
CREATE TABLE gaffer.ready (
    slot smallint NOT NULL,
    queue text NOT NULL,
    tenant text NOT NULL,
    fairness_key text NOT NULL,
    priority smallint NOT NULL,
    run_at timestamptz NOT NULL,
    id bigint NOT NULL,
    kind text NOT NULL
) PARTITION BY LIST (slot);
CREATE TABLE gaffer.ready_0 PARTITION OF gaffer.ready FOR VALUES IN (0);
CREATE TABLE gaffer.ready_1 PARTITION OF gaffer.ready FOR VALUES IN (1);
CREATE TABLE gaffer.ready_2 PARTITION OF gaffer.ready FOR VALUES IN (2);
CREATE INDEX ready_claim_idx ON gaffer.ready (queue, tenant COLLATE "C", fairness_key COLLATE "C", priority, run_at, id);

CREATE TABLE gaffer.ready_ring (
    one boolean PRIMARY KEY DEFAULT true CONSTRAINT ready_ring_one_check CHECK (one),
    cur smallint NOT NULL DEFAULT 0 CONSTRAINT ready_ring_cur_check CHECK (cur BETWEEN 0 AND 2),
    turned_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO gaffer.ready_ring (one) VALUES (true);
