-- API tokens and idempotency keys.

-- name: insert_token
INSERT INTO gaffer.api_tokens (id, name, hash, tenant, scopes) VALUES ($1, $2, $3, $4, $5)
RETURNING created_at;

-- name: token_by_hash
SELECT id, name, hash, tenant, scopes, created_at, revoked_at FROM gaffer.api_tokens WHERE hash = $1;

-- name: list_tokens
SELECT id, name, hash, tenant, scopes, created_at, revoked_at FROM gaffer.api_tokens ORDER BY created_at, id;

-- name: revoke_token
-- Revokes the token and ends its dashboard sessions.
WITH revoked AS (
    UPDATE gaffer.api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING id
), ended AS (
    DELETE FROM gaffer.ui_sessions WHERE token_id IN (SELECT id FROM revoked)
)
SELECT id FROM revoked;

-- name: claim_idempotency_key
-- Takes the key for a first request, or takes over one abandoned for more
-- than $4 ms (its request died mid-way), or one older than $5 ms (expired,
-- whether or not retention has deleted it yet). Returns whether it was
-- taken.
INSERT INTO gaffer.idempotency_keys (tenant, key, request_hash) VALUES ($1, $2, $3)
ON CONFLICT (tenant, key) DO UPDATE
    SET request_hash = excluded.request_hash, created_at = now(), status = 0, response = NULL, content_type = NULL
    WHERE (gaffer.idempotency_keys.status = 0
           AND gaffer.idempotency_keys.created_at < now() - $4 * interval '1 millisecond')
       OR gaffer.idempotency_keys.created_at < now() - $5 * interval '1 millisecond'
RETURNING true;

-- name: get_idempotency_key
SELECT request_hash, status, response, coalesce(content_type, '') FROM gaffer.idempotency_keys WHERE tenant = $1 AND key = $2;

-- name: finish_idempotency_key
UPDATE gaffer.idempotency_keys SET status = $3, response = $4, content_type = $5 WHERE tenant = $1 AND key = $2;

-- name: release_idempotency_key
DELETE FROM gaffer.idempotency_keys WHERE tenant = $1 AND key = $2 AND status = 0;

-- name: delete_old_idempotency_keys
-- Retention: $1 age ms, $2 batch size.
WITH doomed AS (
    SELECT tenant, key FROM gaffer.idempotency_keys
    WHERE created_at < now() - $1 * interval '1 millisecond'
    ORDER BY created_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM gaffer.idempotency_keys k USING doomed WHERE k.tenant = doomed.tenant AND k.key = doomed.key;

-- name: delete_old_revoked_tokens
-- Retention: $1 age ms, $2 batch size. Tokens revoked longer ago than $1
-- (their dashboard sessions went with the revocation).
WITH doomed AS (
    SELECT id FROM gaffer.api_tokens
    WHERE revoked_at < now() - $1 * interval '1 millisecond'
    ORDER BY revoked_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM gaffer.api_tokens t USING doomed WHERE t.id = doomed.id;
