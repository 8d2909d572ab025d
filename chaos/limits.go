package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gafferhq/gaffer/job"
)

// The limited share of the load (Profile.LimitedShare) runs as tenant
// limitedTenant, each job under one of limitKeys limit keys, and a
// cluster-wide limit lets at most keyLimit of a key's jobs run at once.
const (
	limitedTenant = "chaos-limited"
	limitName     = "chaos-per-key"
	limitKeys     = 3
	keyLimit      = 2
)

// setUpLimit sets the limit and the audit behind the limit invariant: a
// row trigger records, for every limited job a statement moves to
// running, how many jobs of its key are running when the statement ends.
// The claim that admits a job holds its bucket's lock until it commits,
// so each claim of a key sees every earlier one committed; the count is
// the key's running attempts at that instant, its own claim included.
// Only a claim raises the count, so its highest value over the audit is
// the most that ever ran at once. The audit counts by the job's columns,
// not by the limit's own SQL.
//
// With o.NoLimitCheck the claim's limit check (gaffer.limit_admit, which
// every claim reaches) is replaced by
// one that admits every candidate: the mutation the limit invariant must
// catch.
func (h *harness) setUpLimit(ctx context.Context) {
	t := h.t
	if _, err := job.NewClient(h.pool, nil).SetLimit(ctx, job.Limit{Name: limitName, Tenant: limitedTenant, Kind: "chaos.work",
		Key: "limit_key", Concurrency: keyLimit}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.pool.Exec(ctx, `
		CREATE TABLE chaos_limit_audit (job_id bigint, key text, running int, node text, at timestamptz DEFAULT clock_timestamp());
		CREATE FUNCTION chaos_limit_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO chaos_limit_audit (job_id, key, running, node)
			SELECT NEW.id, coalesce(NEW.limit_key, ''), count(*), NEW.node FROM gaffer.jobs r
			WHERE r.state = 'running' AND r.tenant = NEW.tenant AND r.kind = NEW.kind
			  AND coalesce(r.limit_key, '') = coalesce(NEW.limit_key, '');
			RETURN NULL;
		END $$;
		CREATE TRIGGER chaos_limit_audit AFTER UPDATE ON gaffer.jobs FOR EACH ROW
			WHEN (NEW.state = 'running' AND OLD.state IS DISTINCT FROM 'running'
			      AND NEW.tenant = 'chaos-limited' AND NEW.kind = 'chaos.work')
			EXECUTE FUNCTION chaos_limit_audit();`); err != nil {
		t.Fatal(err)
	}
	if h.o.NoLimitCheck {
		if _, err := h.pool.Exec(ctx, `
			CREATE OR REPLACE FUNCTION gaffer.limit_admit(q text, c_id bigint[], c_tenant text[], c_kind text[],
				c_fkey text[], cap integer, h_name text[], h_key text[], h_got integer[], at timestamptz, OUT admitted bigint[], OUT considered integer,
				OUT admitted_at timestamptz, OUT b_name text[], OUT b_key text[], OUT b_got integer[])
			LANGUAGE sql AS $$ SELECT c_id[1:cap], least(cardinality(c_id), cap), clock_timestamp(), NULL::text[], NULL::text[], NULL::integer[] $$`); err != nil {
			t.Fatal(err)
		}
		h.logf("mutation: the claim's limit check is removed")
	}
}

// limitedRequest turns r into a job of the limited share, under one of
// the limit keys.
func limitedRequest(r job.Request, key int) job.Request {
	r.Tenant, r.LimitKey = limitedTenant, fmt.Sprintf("key-%d", key)
	return r
}

// checkLimit requires that no limit key ever had more than keyLimit
// jobs running, and that the limit bound at least once (a run in which
// it never did proves nothing).
func (h *harness) checkLimit(ctx context.Context, r *Report, v func(string, ...any)) {
	violations := len(r.Violations)
	rows, err := h.pool.Query(ctx, `SELECT key, count(*), max(running), count(*) FILTER (WHERE running = $1),
		count(*) FILTER (WHERE running > $1) FROM chaos_limit_audit GROUP BY key ORDER BY key`, keyLimit)
	if err != nil {
		h.t.Fatalf("read the limit audit: %v", err)
	}
	defer rows.Close()
	r.LimitPeak = map[string]int{}
	h.mu.Lock()
	r.LimitChanges = h.limitChanges
	h.mu.Unlock()
	for rows.Next() {
		var key string
		var claims, peak, full, over int
		if err := rows.Scan(&key, &claims, &peak, &full, &over); err != nil {
			h.t.Fatalf("read the limit audit: %v", err)
		}
		r.LimitPeak[key] = peak
		r.LimitClaims += claims
		r.LimitFull += full
		if over > 0 {
			var at string
			h.pool.QueryRow(ctx, `SELECT at::text FROM chaos_limit_audit WHERE key = $1 AND running > $2 ORDER BY at LIMIT 1`, key, keyLimit).Scan(&at)
			v("limit %s: key %q had up to %d jobs running at once (limit %d); %d of its %d claims went over it, the first at %s",
				limitName, key, peak, keyLimit, over, claims, at)
		}
	}
	if err := rows.Err(); err != nil {
		h.t.Fatalf("read the limit audit: %v", err)
	}
	if h.o.Profile.LimitedShare > 0 && r.LimitFull == 0 && len(r.Violations) == violations {
		v("limit %s never bound (%d limited claims, none with %d of a key running): the limit invariant proved nothing", limitName, r.LimitClaims, keyLimit)
	}
}

// churnLimit is the limit limitChurn creates, changes and deletes.
const churnLimit = "chaos-churn"

// limitChurn creates, changes and deletes a second limit on the load
// every second or so while claims run, when the profile asks: by
// fairness key, its concurrency or rate changed, or its key (which
// deletes its buckets), or the limit deleted and made again. It is wide
// enough not to slow the load; what it tests is that changes of one
// limit, serialised with the claims in flight, never switch another off
// (the limit invariant on the audited limit) nor make a claim fail.
func (h *harness) limitChurn(ctx context.Context) {
	if !h.o.Profile.LimitChurn {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(h.o.Seed), 3))
	client := job.NewClient(h.pool, nil)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(500+rng.IntN(1000)) * time.Millisecond):
		}
		var err error
		switch rng.IntN(4) {
		case 0:
			err = client.DeleteLimit(ctx, churnLimit)
			if errors.Is(err, job.ErrLimitNotFound) {
				err = nil
			}
		case 1:
			_, err = client.SetLimit(ctx, job.Limit{Name: churnLimit, Kind: "chaos.work", Key: "fairness_key", Concurrency: 50 + rng.IntN(100)})
		case 2:
			_, err = client.SetLimit(ctx, job.Limit{Name: churnLimit, Kind: "chaos.work", Key: "tenant", Concurrency: 200 + rng.IntN(100)})
		default:
			_, err = client.SetLimit(ctx, job.Limit{Name: churnLimit, Kind: "chaos.work", Key: "fairness_key",
				Rate: 500 + rng.IntN(500), Period: time.Second, Burst: 500})
		}
		if err == nil {
			h.mu.Lock()
			h.limitChanges++
			h.mu.Unlock()
		}
	}
}
