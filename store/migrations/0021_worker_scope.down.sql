-- Tokens lose the worker scope; one left with no scope is deleted.
UPDATE gaffer.api_tokens SET scopes = array_remove(scopes, 'worker');
DELETE FROM gaffer.api_tokens WHERE cardinality(scopes) = 0;
ALTER TABLE gaffer.api_tokens DROP CONSTRAINT api_tokens_scopes_check;
ALTER TABLE gaffer.api_tokens ADD CONSTRAINT api_tokens_scopes_check
    CHECK (scopes <@ ARRAY['jobs:read', 'jobs:write', 'cluster:read', 'admin']::text[] AND cardinality(scopes) > 0);
