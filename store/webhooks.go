package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	sqlCountLiveWebhookSecrets    = query("count_live_webhook_secrets")
	sqlExpireCurrentWebhookSecret = query("expire_current_webhook_secret")
	sqlInsertWebhookSecret        = query("insert_webhook_secret")
	sqlListWebhookSecrets         = query("list_webhook_secrets")
	sqlWebhookSigningKeys         = query("webhook_signing_keys")
	sqlDeleteWebhookSecret        = query("delete_webhook_secret")
	sqlDeleteExpiredWebhookSecret = query("delete_expired_webhook_secrets")
)

// WebhookSecret is a signing secret's record, without its key.
type WebhookSecret struct {
	ID        string
	Tenant    string
	CreatedAt time.Time
	// ExpiresAt is set once a newer secret replaced this one: it signs
	// beside the new one until then.
	ExpiresAt *time.Time
}

// ErrTooManySecrets: the tenant holds as many live secrets as allowed.
var ErrTooManySecrets = errors.New("too many live webhook secrets")

// RotateWebhookSecret makes key the tenant's current secret; the previous
// one keeps signing for grace. It refuses (ErrTooManySecrets) when the
// tenant already holds max secrets that still sign.
func (s *Store) RotateWebhookSecret(ctx context.Context, id, tenant string, key []byte, grace time.Duration, max int) (WebhookSecret, error) {
	var w WebhookSecret
	err := pgx.BeginTxFunc(ctx, s.pool, guarded, func(tx pgx.Tx) error {
		var live int
		if err := tx.QueryRow(ctx, sqlCountLiveWebhookSecrets, tenant).Scan(&live); err != nil {
			return err
		}
		if live >= max {
			return fmt.Errorf("%w: tenant %q holds %d (at most %d); delete one first", ErrTooManySecrets, tenant, live, max)
		}
		if _, err := tx.Exec(ctx, sqlExpireCurrentWebhookSecret, tenant, grace.Milliseconds()); err != nil {
			return err
		}
		return tx.QueryRow(ctx, sqlInsertWebhookSecret, id, tenant, key).Scan(&w.ID, &w.Tenant, &w.CreatedAt, &w.ExpiresAt)
	})
	if err != nil && !errors.Is(err, ErrTooManySecrets) {
		if isUniqueViolation(err) {
			return w, fmt.Errorf("%w: another rotation for tenant %q ran at the same time", ErrConflict, tenant)
		}
		return w, fmt.Errorf("rotate webhook secret: %w", err)
	}
	return w, err
}

// ListWebhookSecrets lists a tenant's secrets that still sign, newest
// first.
func (s *Store) ListWebhookSecrets(ctx context.Context, tenant string) ([]WebhookSecret, error) {
	rows, err := s.pool.Query(ctx, sqlListWebhookSecrets, tenant)
	if err != nil {
		return nil, fmt.Errorf("list webhook secrets: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (WebhookSecret, error) {
		var w WebhookSecret
		err := r.Scan(&w.ID, &w.Tenant, &w.CreatedAt, &w.ExpiresAt)
		return w, err
	})
}

// WebhookSigningKeys returns the keys a tenant's deliveries are signed
// with, newest first.
func (s *Store) WebhookSigningKeys(ctx context.Context, tenant string) ([][]byte, error) {
	rows, err := s.pool.Query(ctx, sqlWebhookSigningKeys, tenant)
	if err != nil {
		return nil, fmt.Errorf("webhook signing keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("webhook signing keys: %w", err)
	}
	return keys, nil
}

// DeleteWebhookSecret deletes one of a tenant's secrets. Errors:
// ErrNotFound.
func (s *Store) DeleteWebhookSecret(ctx context.Context, tenant, id string) error {
	var got string
	err := s.pool.QueryRow(ctx, sqlDeleteWebhookSecret, tenant, id).Scan(&got)
	if err != nil {
		return notFound(err)
	}
	return nil
}

// DeleteExpiredWebhookSecrets deletes up to limit secrets past their
// expiry, through q (a fenced transaction) or the pool.
func (s *Store) DeleteExpiredWebhookSecrets(ctx context.Context, q DB, limit int) (int64, error) {
	tag, err := s.db(q).Exec(ctx, sqlDeleteExpiredWebhookSecret, limit)
	if err != nil {
		return 0, fmt.Errorf("delete expired webhook secrets: %w", err)
	}
	return tag.RowsAffected(), nil
}
