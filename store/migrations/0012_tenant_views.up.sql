-- What one tenant may see of the cluster: its own throughput, and a scope
-- for the cluster's own views (nodes, leader).

-- Throughput samples per tenant beside the cluster total (tenant '*').
-- Per-tenant samples are kept for an hour (the dashboard's chart), the
-- totals for a day.
ALTER TABLE gaffer.throughput_samples ADD COLUMN tenant text NOT NULL DEFAULT '*';
ALTER TABLE gaffer.throughput_samples DROP CONSTRAINT throughput_samples_pkey;
ALTER TABLE gaffer.throughput_samples ADD PRIMARY KEY (tenant, at);

-- cluster:read lets a token see nodes and the cluster's state without
-- admin's power to change them.
ALTER TABLE gaffer.api_tokens DROP CONSTRAINT api_tokens_scopes_check;
ALTER TABLE gaffer.api_tokens ADD CONSTRAINT api_tokens_scopes_check
    CHECK (scopes <@ ARRAY['jobs:read', 'jobs:write', 'cluster:read', 'admin']::text[] AND cardinality(scopes) > 0);

-- The kinds each node handles, so that metrics label only kinds some node
-- knows (tenant-chosen kinds are counted as "other").
ALTER TABLE gaffer.nodes ADD COLUMN kinds jsonb NOT NULL DEFAULT '[]';
