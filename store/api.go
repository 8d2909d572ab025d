package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	sqlInsertToken          = query("insert_token")
	sqlTokenByHash          = query("token_by_hash")
	sqlListTokens           = query("list_tokens")
	sqlRevokeToken          = query("revoke_token")
	sqlClaimIdempotencyKey  = query("claim_idempotency_key")
	sqlGetIdempotencyKey    = query("get_idempotency_key")
	sqlFinishIdempotencyKey = query("finish_idempotency_key")
	sqlReleaseIdempotency   = query("release_idempotency_key")
	sqlDeleteOldIdempotency = query("delete_old_idempotency_keys")
)

// Token is an API token's record (never the token itself).
type Token struct {
	ID        string
	Name      string
	Hash      []byte
	Tenant    string
	Scopes    []string
	CreatedAt time.Time
	RevokedAt *time.Time
}

func scanToken(row pgx.Row) (Token, error) {
	var t Token
	err := row.Scan(&t.ID, &t.Name, &t.Hash, &t.Tenant, &t.Scopes, &t.CreatedAt, &t.RevokedAt)
	return t, err
}

// InsertToken stores a token record.
func (s *Store) InsertToken(ctx context.Context, t Token) (Token, error) {
	if err := s.pool.QueryRow(ctx, sqlInsertToken, t.ID, t.Name, t.Hash, t.Tenant, t.Scopes).Scan(&t.CreatedAt); err != nil {
		return t, fmt.Errorf("create token: %w", err)
	}
	return t, nil
}

// TokenByHash finds a token by the sha256 of its text. Errors: ErrNotFound.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, sqlTokenByHash, hash))
	if err != nil {
		return t, notFound(err)
	}
	return t, nil
}

// ListTokens lists every token record.
func (s *Store) ListTokens(ctx context.Context) ([]Token, error) {
	rows, err := s.pool.Query(ctx, sqlListTokens)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// RevokeToken revokes a token. Errors: ErrNotFound.
func (s *Store) RevokeToken(ctx context.Context, id string) error {
	var got string
	if err := s.pool.QueryRow(ctx, sqlRevokeToken, id).Scan(&got); err != nil {
		return notFound(err)
	}
	return nil
}

// IdempotentResponse is the stored outcome of the first request with a
// key.
type IdempotentResponse struct {
	RequestHash []byte
	// Status is 0 while the first request is in progress.
	Status      int
	Body        []byte
	ContentType string
}

// ClaimIdempotencyKey takes (tenant, key) for a new request. If the key is
// already taken it returns false and the stored response. A claim left
// unfinished for longer than abandonAfter, or any key older than
// expireAfter, is taken over.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, tenant, key string, requestHash []byte, abandonAfter, expireAfter time.Duration) (bool, IdempotentResponse, error) {
	var taken bool
	err := s.pool.QueryRow(ctx, sqlClaimIdempotencyKey, tenant, key, requestHash, abandonAfter.Milliseconds(), expireAfter.Milliseconds()).Scan(&taken)
	if err == nil {
		return true, IdempotentResponse{}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return false, IdempotentResponse{}, fmt.Errorf("idempotency key: %w", err)
	}
	var r IdempotentResponse
	if err := s.pool.QueryRow(ctx, sqlGetIdempotencyKey, tenant, key).Scan(&r.RequestHash, &r.Status, &r.Body, &r.ContentType); err != nil {
		return false, r, fmt.Errorf("idempotency key: %w", err)
	}
	return false, r, nil
}

// FinishIdempotencyKey stores the response of the request that holds the
// key.
func (s *Store) FinishIdempotencyKey(ctx context.Context, q DB, tenant, key string, status int, body []byte, contentType string) error {
	if _, err := s.db(q).Exec(ctx, sqlFinishIdempotencyKey, tenant, key, status, body, contentType); err != nil {
		return fmt.Errorf("idempotency key: %w", err)
	}
	return nil
}

// ReleaseIdempotencyKey frees a key whose request failed before doing
// anything, so that a retry runs afresh.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, tenant, key string) error {
	_, err := s.pool.Exec(ctx, sqlReleaseIdempotency, tenant, key)
	return err
}

// DeleteOldIdempotencyKeys deletes up to limit keys older than age,
// through q (a fenced transaction) or the pool when q is nil.
func (s *Store) DeleteOldIdempotencyKeys(ctx context.Context, q DB, age time.Duration, limit int) (int64, error) {
	tag, err := s.db(q).Exec(ctx, sqlDeleteOldIdempotency, age.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete old idempotency keys: %w", err)
	}
	return tag.RowsAffected(), nil
}

var sqlDeleteOldRevokedTokens = query("delete_old_revoked_tokens")

// DeleteOldRevokedTokens deletes up to limit token records revoked more
// than age ago, oldest first. q is the leader's fenced transaction, or nil
// for the pool.
func (s *Store) DeleteOldRevokedTokens(ctx context.Context, q DB, age time.Duration, limit int) (int64, error) {
	tag, err := s.db(q).Exec(ctx, sqlDeleteOldRevokedTokens, age.Milliseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("delete old revoked tokens: %w", err)
	}
	return tag.RowsAffected(), nil
}
