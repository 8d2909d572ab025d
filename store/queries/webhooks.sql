-- Webhook signing secrets, per tenant.

-- name: count_live_webhook_secrets
SELECT count(*) FROM gaffer.webhook_secrets WHERE tenant = $1 AND (expires_at IS NULL OR expires_at > now());

-- name: expire_current_webhook_secret
-- $1 tenant, $2 grace ms: the current secret keeps signing that long.
UPDATE gaffer.webhook_secrets SET expires_at = now() + $2 * interval '1 millisecond'
WHERE tenant = $1 AND expires_at IS NULL;

-- name: insert_webhook_secret
INSERT INTO gaffer.webhook_secrets (id, tenant, key) VALUES ($1, $2, $3)
RETURNING id, tenant, created_at, expires_at;

-- name: list_webhook_secrets
-- A tenant's secrets that still sign, newest first, without their keys.
SELECT id, tenant, created_at, expires_at FROM gaffer.webhook_secrets
WHERE tenant = $1 AND (expires_at IS NULL OR expires_at > now())
ORDER BY created_at DESC, id;

-- name: webhook_signing_keys
SELECT key FROM gaffer.webhook_secrets
WHERE tenant = $1 AND (expires_at IS NULL OR expires_at > now())
ORDER BY created_at DESC, id;

-- name: delete_webhook_secret
DELETE FROM gaffer.webhook_secrets WHERE tenant = $1 AND id = $2 RETURNING id;

-- name: delete_expired_webhook_secrets
-- Retention: $1 batch size.
WITH doomed AS (
    SELECT id FROM gaffer.webhook_secrets WHERE expires_at < now() ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
)
DELETE FROM gaffer.webhook_secrets w USING doomed WHERE w.id = doomed.id;
