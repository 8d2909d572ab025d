package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	sqlUpsertLimit        = query("upsert_limit")
	sqlDeleteLimit        = query("delete_limit")
	sqlListLimits         = query("list_limits")
	sqlLimitUsage         = query("limit_usage")
	sqlSetTenantWeight    = query("set_tenant_weight")
	sqlDeleteTenantWeight = query("delete_tenant_weight")
	sqlListTenantWeights  = query("list_tenant_weights")
)

// LimitRow is a limit as stored; zero numbers and empty strings are
// "none" / "any".
type LimitRow struct {
	Name, Queue, Kind, Tenant, KeyFrom string
	Concurrency, Rate, Burst           int
	Period                             time.Duration
	CreatedAt, UpdatedAt               time.Time
}

// ErrBadLimitKey: the key is not one a limit can count by (the grammar
// is the limits_key_check constraint's, store/schema/tables.sql).
var ErrBadLimitKey = errors.New("not a limit key")

// UpsertLimit creates or replaces a limit and reports whether it was
// created. A changed key or rate starts its buckets afresh. It waits for
// the claims in flight (the limits lock). Errors: ErrBadLimitKey.
func (s *Store) UpsertLimit(ctx context.Context, l LimitRow) (bool, error) {
	return s.upsertLimit(ctx, l, nil)
}

// ErrLimitTaken: a limit of that name exists and belongs to another
// tenant, or to none (shared).
var ErrLimitTaken = errors.New("the limit's name is another's")

// UpsertTenantLimit is UpsertLimit for a limit of l.Tenant (not empty)
// that replaces only a limit of the same tenant, in one statement: a
// tenant's admin token cannot take over a shared or another tenant's
// limit by its name. Errors: ErrBadLimitKey, ErrLimitTaken.
func (s *Store) UpsertTenantLimit(ctx context.Context, l LimitRow) (bool, error) {
	if l.Tenant == "" {
		return false, fmt.Errorf("set limit %q: a tenant's limit needs its tenant", l.Name)
	}
	return s.upsertLimit(ctx, l, &l.Tenant)
}

func (s *Store) upsertLimit(ctx context.Context, l LimitRow, owner *string) (bool, error) {
	var created bool
	err := s.pool.QueryRow(ctx, sqlUpsertLimit, l.Name, nullString(l.Queue), nullString(l.Kind), nullString(l.Tenant), l.KeyFrom,
		nullInt(l.Concurrency), nullInt(l.Rate), nullInt64(l.Period.Milliseconds()), nullInt(l.Burst), owner).Scan(&created)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23514" && pe.ConstraintName == "limits_key_check" {
		return false, fmt.Errorf("set limit %q: %w: %q", l.Name, ErrBadLimitKey, l.KeyFrom)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("set limit %q: %w", l.Name, ErrLimitTaken)
	}
	if err != nil {
		return false, fmt.Errorf("set limit %q: %w", l.Name, err)
	}
	return created, nil
}

// DeleteLimit deletes a limit. Errors: ErrNotFound.
func (s *Store) DeleteLimit(ctx context.Context, name string) error {
	return s.deleteLimit(ctx, name, nil)
}

// DeleteTenantLimit deletes a limit only if it is tenant's. Errors:
// ErrNotFound (no limit of that name is tenant's).
func (s *Store) DeleteTenantLimit(ctx context.Context, tenant, name string) error {
	return s.deleteLimit(ctx, name, &tenant)
}

func (s *Store) deleteLimit(ctx context.Context, name string, owner *string) error {
	var got string
	if err := s.pool.QueryRow(ctx, sqlDeleteLimit, name, owner).Scan(&got); err != nil {
		return notFound(err)
	}
	return nil
}

// ListLimits returns every limit by name.
func (s *Store) ListLimits(ctx context.Context) ([]LimitRow, error) {
	rows, err := s.pool.Query(ctx, sqlListLimits)
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (LimitRow, error) {
		var l LimitRow
		var periodMS int64
		err := r.Scan(&l.Name, &l.Queue, &l.Kind, &l.Tenant, &l.KeyFrom, &l.Concurrency, &l.Rate, &periodMS, &l.Burst, &l.CreatedAt, &l.UpdatedAt)
		l.Period = time.Duration(periodMS) * time.Millisecond
		return l, err
	})
}

// LimitUsage is how much of a limit is in use now.
type LimitUsage struct {
	Name string
	// InUse counts the running attempts the limit matches, over all keys;
	// Busiest is the most under one key.
	InUse, Busiest int64
	// Due counts the due, unclaimed jobs it matches, up to the cap given.
	Due int64
	// Keys are the busiest keys and their running attempts.
	Keys []KeyUsage
}

// KeyUsage is one key's running attempts under a limit.
type KeyUsage struct {
	Key     string `json:"key"`
	Running int64  `json:"running"`
}

// LimitUsages reports each limit's usage: up to keys keys each, due jobs
// counted up to dueCap.
func (s *Store) LimitUsages(ctx context.Context, keys, dueCap int) ([]LimitUsage, error) {
	rows, err := s.pool.Query(ctx, sqlLimitUsage, keys, dueCap)
	if err != nil {
		return nil, fmt.Errorf("limit usage: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (LimitUsage, error) {
		var u LimitUsage
		var raw []byte
		if err := r.Scan(&u.Name, &u.InUse, &u.Busiest, &u.Due, &raw); err != nil {
			return u, err
		}
		return u, json.Unmarshal(raw, &u.Keys)
	})
}

// SetTenantWeight sets a tenant's weight in fair claiming; weight 1 (the
// default) deletes the row.
func (s *Store) SetTenantWeight(ctx context.Context, tenant string, weight int) error {
	var err error
	if weight == 1 {
		_, err = s.pool.Exec(ctx, sqlDeleteTenantWeight, tenant)
	} else {
		_, err = s.pool.Exec(ctx, sqlSetTenantWeight, tenant, weight)
	}
	if err != nil {
		return fmt.Errorf("set the weight of tenant %q: %w", tenant, err)
	}
	return nil
}

// TenantWeights returns the tenants whose weight is not 1.
func (s *Store) TenantWeights(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, sqlListTenantWeights)
	if err != nil {
		return nil, fmt.Errorf("tenant weights: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var t string
		var w int
		if err := rows.Scan(&t, &w); err != nil {
			return nil, err
		}
		out[t] = w
	}
	return out, rows.Err()
}

func nullInt(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

func nullInt64(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}
