-- gaffer:expand
-- Per-queue throughput history for the dashboard's queue page: jobs
-- finished per minute, per queue and tenant and per queue in all (tenant
-- '*'), kept for a week. Written by
-- the leader's throughput sample (store/queries/queues.sql,
-- sample_throughput); binaries of the release before never read or write
-- it, and sample as before.
CREATE TABLE gaffer.queue_throughput (
    queue     text        NOT NULL,
    tenant    text        NOT NULL,
    minute    timestamptz NOT NULL,
    completed bigint      NOT NULL,
    failed    bigint      NOT NULL,
    PRIMARY KEY (queue, tenant, minute)
);
-- Retention deletes by age.
CREATE INDEX queue_throughput_minute_idx ON gaffer.queue_throughput (minute);
