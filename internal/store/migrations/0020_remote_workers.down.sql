DROP FUNCTION gaffer.sweep_remote_workers(bigint, bigint);
DROP FUNCTION gaffer.release_node_jobs(text[], text);
DROP FUNCTION gaffer.claim_pick_remote(text, integer, text, text, text[], text[], text[], smallint[], timestamptz[], bigint[], text, text);
DROP FUNCTION gaffer.fair_take_kinds(text, integer, text[], text[], text[], text[], text[], smallint[], timestamptz[], bigint[]);
DROP FUNCTION gaffer.tenant_units(text, text, integer, text);

ALTER TABLE gaffer.jobs
    DROP CONSTRAINT jobs_progress_check,
    DROP COLUMN progress_at,
    DROP COLUMN progress_attempt,
    DROP COLUMN progress_message,
    DROP COLUMN progress;

-- Tokens lose the worker scope; one left with no scope is deleted.
UPDATE gaffer.api_tokens SET scopes = array_remove(scopes, 'worker');
DELETE FROM gaffer.api_tokens WHERE cardinality(scopes) = 0;
ALTER TABLE gaffer.api_tokens DROP CONSTRAINT api_tokens_scopes_check;
ALTER TABLE gaffer.api_tokens ADD CONSTRAINT api_tokens_scopes_check
    CHECK (scopes <@ ARRAY['jobs:read', 'jobs:write', 'cluster:read', 'admin']::text[] AND cardinality(scopes) > 0);

-- Remote workers' rows go; their running jobs' leases expire and the
-- lease rescuer runs them again.
DELETE FROM gaffer.nodes WHERE kind = 'remote';
ALTER TABLE gaffer.nodes
    DROP CONSTRAINT nodes_kind_check,
    DROP COLUMN tenant,
    DROP COLUMN kind;
