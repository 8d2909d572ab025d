-- Cluster-wide throughput samples for the dashboard: jobs finished per
-- interval, taken by the leader.
CREATE TABLE gaffer.throughput_samples (
    at        timestamptz PRIMARY KEY,
    seconds   double precision NOT NULL,
    completed bigint NOT NULL,
    failed    bigint NOT NULL
);
