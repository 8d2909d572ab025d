-- gaffer:expand
-- The worker scope: register remote workers, claim and finish jobs.
ALTER TABLE gaffer.api_tokens DROP CONSTRAINT api_tokens_scopes_check;
ALTER TABLE gaffer.api_tokens ADD CONSTRAINT api_tokens_scopes_check
    CHECK (scopes <@ ARRAY['jobs:read', 'jobs:write', 'cluster:read', 'worker', 'admin']::text[] AND cardinality(scopes) > 0);
