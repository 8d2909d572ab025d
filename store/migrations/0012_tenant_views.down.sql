ALTER TABLE gaffer.nodes DROP COLUMN kinds;
UPDATE gaffer.api_tokens SET scopes = array_remove(scopes, 'cluster:read');
DELETE FROM gaffer.api_tokens WHERE cardinality(scopes) = 0;
ALTER TABLE gaffer.api_tokens DROP CONSTRAINT api_tokens_scopes_check;
ALTER TABLE gaffer.api_tokens ADD CONSTRAINT api_tokens_scopes_check
    CHECK (scopes <@ ARRAY['jobs:read', 'jobs:write', 'admin']::text[] AND cardinality(scopes) > 0);
DELETE FROM gaffer.throughput_samples WHERE tenant <> '*';
ALTER TABLE gaffer.throughput_samples DROP CONSTRAINT throughput_samples_pkey;
ALTER TABLE gaffer.throughput_samples DROP COLUMN tenant;
ALTER TABLE gaffer.throughput_samples ADD PRIMARY KEY (at);
