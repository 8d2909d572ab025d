package job

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gafferhq/gaffer/store"
)

// Limit caps the jobs it matches across the whole cluster, enforced by
// the claim itself in PostgreSQL (so it holds with etcd down, and whatever
// nodes die or pause): at most Concurrency of them running at once, and
// at most Rate starts per Period (in bursts of up to Burst), counted per
// key. A job over a limit stays pending and due; it does not fail.
//
// A running attempt holds its slot until it ends — completed, failed,
// released, or rescued once its lease expired (a killed or paused node's
// slots come back when its jobs are rescued, never earlier). A new or
// lowered limit applies to claims from its commit on.
type Limit struct {
	// Name identifies the limit: 1-64 lowercase letters, digits, '_', '.'
	// or '-'.
	Name string `json:"name"`
	// Queue, Kind and Tenant select the jobs the limit applies to; ""
	// matches any.
	Queue  string `json:"queue,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	// Key divides the matched jobs into separately limited groups: ""
	// (one group), "tenant", "kind", "queue", "limit_key", "fairness_key",
	// "args.<field>[.<field>…]" (a string in the job's args), or
	// "host(args.<field>…)" (the host of a URL in the args).
	Key string `json:"key,omitempty"`
	// Concurrency is the most running at once per key; 0 for no
	// concurrency limit.
	Concurrency int `json:"concurrency,omitempty"`
	// Rate is the most starts per Period per key (0: no rate limit), in
	// bursts of up to Burst (default Rate).
	Rate   int           `json:"rate,omitempty"`
	Period time.Duration `json:"-"`
	Burst  int           `json:"burst,omitempty"`

	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Bounds on limits.
const (
	MaxConcurrency = 1_000_000
	MaxRate        = 1_000_000
	MaxPeriod      = 24 * time.Hour
)

// badKey is the error for a key the limits_key_check constraint refuses:
// the grammar of a limit's key has one text, that constraint's
// (store/schema/tables.sql), which SetLimit reports through this.
func badKey(key string) error {
	return &ValidationError{Field: "key", Message: fmt.Sprintf(`must be "", "tenant", "kind", "queue", "limit_key", "fairness_key", "args.<field>…" or "host(args.<field>…)", got %q`, key)}
}

// Validate checks l and fills in defaults (Burst). Errors are
// *ValidationError naming the field. The key's grammar is checked where
// it is kept, by the database: SetLimit reports a key it refuses.
func (l *Limit) Validate() error {
	if err := ValidateName("name", l.Name); err != nil {
		return err
	}
	if l.Queue != "" {
		if err := ValidateName("queue", l.Queue); err != nil {
			return err
		}
	}
	if l.Kind != "" {
		if err := ValidateKind(l.Kind); err != nil {
			return err
		}
	}
	if l.Tenant != "" {
		if err := ValidateName("tenant", l.Tenant); err != nil {
			return err
		}
	}
	if len(l.Key) > 128 {
		return badKey(l.Key)
	}
	switch {
	case l.Concurrency < 0 || l.Concurrency > MaxConcurrency:
		return &ValidationError{Field: "concurrency", Message: fmt.Sprintf("must be between 1 and %d, got %d", MaxConcurrency, l.Concurrency)}
	case l.Rate < 0 || l.Rate > MaxRate:
		return &ValidationError{Field: "rate", Message: fmt.Sprintf("must be between 1 and %d, got %d", MaxRate, l.Rate)}
	case l.Concurrency == 0 && l.Rate == 0:
		return &ValidationError{Field: "concurrency", Message: "a limit needs a concurrency, a rate, or both"}
	case l.Rate == 0 && (l.Period != 0 || l.Burst != 0):
		return &ValidationError{Field: "period", Message: "period and burst go with a rate"}
	case l.Rate > 0 && (l.Period < time.Millisecond || l.Period > MaxPeriod || l.Period%time.Millisecond != 0):
		return &ValidationError{Field: "period", Message: fmt.Sprintf("must be a whole number of milliseconds from 1ms to %s, got %s", MaxPeriod, l.Period)}
	case l.Burst < 0 || l.Burst > MaxRate:
		return &ValidationError{Field: "burst", Message: fmt.Sprintf("must be between 1 and %d, got %d", MaxRate, l.Burst)}
	}
	if l.Rate > 0 && l.Burst == 0 {
		l.Burst = l.Rate
	}
	return nil
}

// LimitUsage is how much of a limit is in use now.
type LimitUsage struct {
	Limit
	// InUse counts the running attempts the limit matches, over all its
	// keys; Busiest is the most under one key (compare with Concurrency).
	InUse   int64 `json:"in_use"`
	Busiest int64 `json:"busiest_key_running"`
	// Due counts the due, unclaimed jobs it matches (up to 10,000, then
	// "at least"): waiting for a slot, a token or a worker.
	Due int64 `json:"due"`
	// Keys are the busiest keys and their running attempts.
	Keys []KeyUsage `json:"keys"`
}

// KeyUsage is one key's running attempts under a limit.
type KeyUsage struct {
	Key     string `json:"key"`
	Running int64  `json:"running"`
}

// DueCap is where LimitUsage.Due stops counting.
const DueCap = 10000

// ErrLimitNotFound: no limit has that name.
var ErrLimitNotFound = errors.New("no such limit")

// SetLimit creates or replaces the limit named l.Name and reports whether
// it was created. A changed key or rate starts the limit's rate buckets
// afresh. Errors: *ValidationError.
func (c *Client) SetLimit(ctx context.Context, l Limit) (bool, error) {
	if err := l.Validate(); err != nil {
		return false, err
	}
	created, err := c.store.UpsertLimit(ctx, store.LimitRow{Name: l.Name, Queue: l.Queue, Kind: l.Kind, Tenant: l.Tenant, KeyFrom: l.Key,
		Concurrency: l.Concurrency, Rate: l.Rate, Period: l.Period, Burst: l.Burst})
	if errors.Is(err, store.ErrBadLimitKey) {
		return false, badKey(l.Key)
	}
	return created, err
}

// ErrLimitTaken: the limit's name is held by a limit of another tenant,
// or by a shared one (no tenant).
var ErrLimitTaken = errors.New("a limit of that name is another tenant's or shared")

// SetTenantLimit is SetLimit for a tenant's own limit (l.Tenant, not
// empty): it creates the limit, or replaces one only if that is already
// l.Tenant's, never a shared or another tenant's limit of the same name.
// Errors: *ValidationError, ErrLimitTaken.
func (c *Client) SetTenantLimit(ctx context.Context, l Limit) (bool, error) {
	if l.Tenant == "" {
		return false, &ValidationError{Field: "tenant", Message: "a tenant's limit must name its tenant"}
	}
	if err := l.Validate(); err != nil {
		return false, err
	}
	created, err := c.store.UpsertTenantLimit(ctx, store.LimitRow{Name: l.Name, Queue: l.Queue, Kind: l.Kind, Tenant: l.Tenant, KeyFrom: l.Key,
		Concurrency: l.Concurrency, Rate: l.Rate, Period: l.Period, Burst: l.Burst})
	switch {
	case errors.Is(err, store.ErrBadLimitKey):
		return false, badKey(l.Key)
	case errors.Is(err, store.ErrLimitTaken):
		return false, fmt.Errorf("%w: %q", ErrLimitTaken, l.Name)
	}
	return created, err
}

// DeleteLimit deletes a limit. Errors: ErrLimitNotFound.
func (c *Client) DeleteLimit(ctx context.Context, name string) error {
	err := c.store.DeleteLimit(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrLimitNotFound, name)
	}
	return err
}

// DeleteTenantLimit deletes a limit only if it is tenant's. Errors:
// ErrLimitNotFound (none of that name is tenant's).
func (c *Client) DeleteTenantLimit(ctx context.Context, tenant, name string) error {
	err := c.store.DeleteTenantLimit(ctx, tenant, name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %q of tenant %q", ErrLimitNotFound, name, tenant)
	}
	return err
}

// Limits returns every limit with its usage now.
func (c *Client) Limits(ctx context.Context) ([]LimitUsage, error) {
	rows, err := c.store.ListLimits(ctx)
	if err != nil {
		return nil, err
	}
	usage, err := c.store.LimitUsages(ctx, 10, DueCap)
	if err != nil {
		return nil, err
	}
	byName := map[string]store.LimitUsage{}
	for _, u := range usage {
		byName[u.Name] = u
	}
	out := make([]LimitUsage, len(rows))
	for i, r := range rows {
		u := byName[r.Name]
		out[i] = LimitUsage{Limit: fromLimitRow(r), InUse: u.InUse, Busiest: u.Busiest, Due: u.Due, Keys: []KeyUsage{}}
		for _, k := range u.Keys {
			out[i].Keys = append(out[i].Keys, KeyUsage{Key: k.Key, Running: k.Running})
		}
	}
	return out, nil
}

// Limit returns one limit with its usage. Errors: ErrLimitNotFound.
func (c *Client) Limit(ctx context.Context, name string) (LimitUsage, error) {
	all, err := c.Limits(ctx)
	if err != nil {
		return LimitUsage{}, err
	}
	for _, l := range all {
		if l.Name == name {
			return l, nil
		}
	}
	return LimitUsage{}, fmt.Errorf("%w: %q", ErrLimitNotFound, name)
}

func fromLimitRow(r store.LimitRow) Limit {
	return Limit{Name: r.Name, Queue: r.Queue, Kind: r.Kind, Tenant: r.Tenant, Key: r.KeyFrom, Concurrency: r.Concurrency,
		Rate: r.Rate, Period: r.Period, Burst: r.Burst, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// MaxWeight bounds a tenant's weight.
const MaxWeight = 1000

// SetTenantWeight sets a tenant's share of each claim relative to the
// others' (default 1): a tenant of weight 3 gets three times the slots of
// a tenant of weight 1 while both have jobs due. Errors: *ValidationError.
func (c *Client) SetTenantWeight(ctx context.Context, tenant string, weight int) error {
	if err := ValidateName("tenant", tenant); err != nil {
		return err
	}
	if weight < 1 || weight > MaxWeight {
		return &ValidationError{Field: "weight", Message: fmt.Sprintf("must be between 1 and %d, got %d", MaxWeight, weight)}
	}
	return c.store.SetTenantWeight(ctx, tenant, weight)
}

// TenantWeights returns the tenants whose weight is not the default 1.
func (c *Client) TenantWeights(ctx context.Context) (map[string]int, error) {
	return c.store.TenantWeights(ctx)
}
