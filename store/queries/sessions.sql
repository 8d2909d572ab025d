-- Dashboard sessions (see migration 0014).

-- name: insert_ui_session
-- $5: the session's length in ms, from the database's now().
INSERT INTO gaffer.ui_sessions (id_hash, token_id, tenant, scopes, expires_at)
VALUES ($1, $2, $3, $4, now() + $5 * interval '1 millisecond');

-- name: ui_session
-- A live session (not expired, its token not revoked) by the hash of its
-- id. Its last_seen_at is moved on at most once a minute, so that page
-- loads do not each write.
WITH s AS (
    SELECT s.id_hash, s.token_id, s.tenant, s.scopes, s.expires_at
    FROM gaffer.ui_sessions s JOIN gaffer.api_tokens t ON t.id = s.token_id
    WHERE s.id_hash = $1 AND s.expires_at > now() AND t.revoked_at IS NULL
), seen AS (
    UPDATE gaffer.ui_sessions u SET last_seen_at = now()
    FROM s WHERE u.id_hash = s.id_hash AND u.last_seen_at < now() - interval '1 minute'
)
SELECT token_id, tenant, scopes, expires_at FROM s;

-- name: delete_ui_session
DELETE FROM gaffer.ui_sessions WHERE id_hash = $1;

-- name: delete_expired_ui_sessions
-- Retention: $1 batch size.
WITH doomed AS (
    SELECT id_hash FROM gaffer.ui_sessions
    WHERE expires_at < now()
    ORDER BY expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
DELETE FROM gaffer.ui_sessions s USING doomed WHERE s.id_hash = doomed.id_hash;
