-- Per-tenant webhook signing secrets (Standard Webhooks). The key must be
-- kept to sign, so it is stored as is: whoever can read this table can
-- sign as any tenant (as whoever can read gaffer.jobs reads every job).
-- A rotated-out secret keeps signing beside the new one until expires_at.

CREATE TABLE gaffer.webhook_secrets (
    id          text PRIMARY KEY,
    tenant      text        NOT NULL,
    key         bytea       NOT NULL CHECK (octet_length(key) BETWEEN 24 AND 64),
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- NULL while current; set when a newer secret replaced it.
    expires_at  timestamptz
);

CREATE INDEX webhook_secrets_tenant_idx ON gaffer.webhook_secrets (tenant, created_at DESC);
-- One current secret per tenant.
CREATE UNIQUE INDEX webhook_secrets_current_idx ON gaffer.webhook_secrets (tenant) WHERE expires_at IS NULL;
