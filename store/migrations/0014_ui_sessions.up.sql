-- Dashboard sessions. The browser's cookie holds a random session id; the
-- table holds only its sha256, so a copy of the table signs nobody in.
-- The token's tenant and scopes are copied at sign-in; every request
-- also checks that the token is not revoked.
CREATE TABLE gaffer.ui_sessions (
    id_hash      bytea       PRIMARY KEY,
    token_id     text        NOT NULL REFERENCES gaffer.api_tokens (id) ON DELETE CASCADE,
    tenant       text        NOT NULL,
    scopes       text[]      NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    last_seen_at timestamptz NOT NULL DEFAULT now()
);

-- Retention deletes expired sessions oldest first; revocation deletes a
-- token's sessions.
CREATE INDEX ui_sessions_expires_idx ON gaffer.ui_sessions (expires_at);
CREATE INDEX ui_sessions_token_idx ON gaffer.ui_sessions (token_id);
