-- API tokens and idempotency keys.

CREATE TABLE gaffer.api_tokens (
    id           text PRIMARY KEY,
    name         text        NOT NULL,
    -- sha256 of the whole token; the token itself is never stored.
    hash         bytea       NOT NULL UNIQUE,
    -- The tenant the token acts for; "*" (admin tokens only) spans tenants.
    tenant       text        NOT NULL,
    scopes       text[]      NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    CONSTRAINT api_tokens_scopes_check CHECK (scopes <@ ARRAY['jobs:read', 'jobs:write', 'admin']::text[] AND cardinality(scopes) > 0),
    CONSTRAINT api_tokens_span_check CHECK (tenant <> '*' OR 'admin' = ANY(scopes))
);

CREATE TABLE gaffer.idempotency_keys (
    tenant        text        NOT NULL,
    key           text        NOT NULL,
    request_hash  bytea       NOT NULL,
    -- 0 while the first request is being handled.
    status        integer     NOT NULL DEFAULT 0,
    response      bytea,
    content_type  text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, key)
);

CREATE INDEX idempotency_keys_created_idx ON gaffer.idempotency_keys (created_at);
