package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	sqlClaimPromote = query("claim_promote")
	sqlClaim        = query("claim_jobs")
)

// ClaimParams says what to claim and how long the lease lasts. One claim
// serves every claim path: a node's claim of a queue, its side claim of
// a few units (Units), and a remote worker's claim (Remote).
type ClaimParams struct {
	Queue string
	Limit int
	// Token stamps every job claimed by this call; with the job's id and
	// new attempt number it forms the lease.
	Token    int64
	LeaseTTL time.Duration
	// Node is the claiming node, or the remote worker's id.
	Node string
	// Remote makes this a remote worker's claim: nothing for a worker
	// that is draining, gone or unknown, and only the jobs of Tenant
	// (AllTenants or "": any tenant's) and of Kinds (none: any kind but
	// Gaffer's own, gaffer.*, which only nodes run).
	Remote bool
	Tenant string
	Kinds  []string
	// Cursors start each listed unit's scan past its position: jobs
	// before it are not considered (the dead index entries earlier claims
	// left are not walked again). See ClaimCursor.
	Cursors []UnitCursor
	// After is where the caller's previous claim of the queue stopped
	// among its units (Claimed.Next): this claim starts with the units
	// below it, then wraps around. nil starts at the top.
	After *Unit
	// Units, when set, makes this a side claim: only these units' jobs
	// are taken, each from its start (Cursors, After, Served and Grace
	// are not used).
	Units []Unit
	// Served are the units the caller's last claim took jobs of. While
	// one of them has due jobs, a unit outside them whose due jobs all
	// came due less than Grace ago is left out of the claim: the caller's
	// side claim, asked for by the jobs' insert, takes them.
	Served []Unit
	Grace  time.Duration
	// MaxBytes, when set, bounds what the claim returns (Job.WireBytes,
	// summed): the first job is always returned; the jobs past the bound
	// are released in the claim's own transaction (ReleaseJobs, with
	// ReasonOverBudget), so the claim commits without them and they are
	// due again at once. The claim statement itself is not changed: it
	// cannot know the jobs' sizes before it takes them.
	MaxBytes int
	// BytesUsed is what the caller's answer holds already (the jobs of
	// its earlier claims for the same answer): it counts against
	// MaxBytes, and with some used the first job is not kept regardless.
	BytesUsed int
}

// ReasonOverBudget is the error a job released by a claim over its
// MaxBytes carries in its history.
const ReasonOverBudget = "released: past the claim's response budget (another claim takes it)"

// Unit is a fairness unit: jobs of one tenant with one fairness key.
// Within a queue, each claim shares its slots among the units.
type Unit struct {
	Tenant      string
	FairnessKey string
}

// UnitCursor is where a unit's previous claim ended.
type UnitCursor struct {
	Unit
	ClaimPosition
}

// ClaimPosition is a place in claim order: (priority, run_at, id).
type ClaimPosition struct {
	Priority int
	RunAt    time.Time
	ID       int64
}

// Less reports whether p comes before q in claim order.
func (p ClaimPosition) Less(q ClaimPosition) bool {
	if p.Priority != q.Priority {
		return p.Priority < q.Priority
	}
	if !p.RunAt.Equal(q.RunAt) {
		return p.RunAt.Before(q.RunAt)
	}
	return p.ID < q.ID
}

// Claimed is what a claim took.
type Claimed struct {
	// Jobs are the claimed jobs, each running under a new lease.
	Jobs []Job
	// Next is where the caller's next claim of the queue should start
	// (ClaimParams.After); nil when this one let every unit have its
	// turn.
	Next *Unit
	// Busy says the claim took nothing because a limit was being changed
	// (the change waits for the claims in flight; claims made meanwhile
	// take nothing): claim again in a few milliseconds.
	Busy bool
	// Limited says a limit refused some of the jobs the claim weighed:
	// if it came back short, due jobs may be left for when a slot frees.
	Limited bool
}

// Claim claims up to Limit due jobs of one queue, in one statement
// (gaffer.claim, store/schema/claim.sql): fairly among the queue's units,
// highest priority first within each, skipping rows other claimers
// hold, within the limits. Each claimed job's attempt is incremented and
// its lease expires LeaseTTL after the database's now(). A paused queue
// or a draining claimer gets nothing; so does a claim made while a limit
// is being changed, which says so (Busy): claim again in a few
// milliseconds, with a fresh context (the change waits for the claims in
// flight and commits at once).
func (s *Store) Claim(ctx context.Context, p ClaimParams) (Claimed, error) {
	if p.Limit < 1 {
		return Claimed{}, nil
	}
	n := len(p.Cursors)
	var (
		cTenants, cKeys       = make([]string, n), make([]string, n)
		cPrios                = make([]int16, n)
		cRunAts               = make([]time.Time, n)
		cIDs                  = make([]int64, n)
		afterTenant, afterKey *string
		tenant                *string
		kinds, sTenants, sKey []string
	)
	for i, c := range p.Cursors {
		cTenants[i], cKeys[i], cPrios[i], cRunAts[i], cIDs[i] = c.Tenant, c.FairnessKey, int16(c.Priority), c.RunAt, c.ID
	}
	if p.After != nil {
		afterTenant, afterKey = &p.After.Tenant, &p.After.FairnessKey
	}
	if p.Remote {
		if p.Tenant != AllTenants {
			tenant = nullString(p.Tenant)
		}
		// No kinds named: every kind but Gaffer's own (an empty array,
		// which claim_unit reads so); a node passes NULL, every kind.
		kinds = []string{}
		if len(p.Kinds) > 0 {
			kinds = p.Kinds
		}
	}
	if len(p.Units) > 0 {
		sTenants, sKey = unitArrays(p.Units)
	}
	kTenants, kKeys := unitArrays(p.Served)
	// One round trip, one transaction: the queue's scheduled jobs whose
	// time has come are made due, then claimed with the rest. (The claim
	// statement itself cannot take jobs a statement within it made due.)
	var b pgx.Batch
	b.Queue(sqlClaimPromote, p.Queue)
	b.Queue(sqlClaim, p.Queue, p.Limit, p.Token, p.LeaseTTL.Milliseconds(), p.Node,
		p.Remote, tenant, kinds, sTenants, sKey, cTenants, cKeys, cPrios, cRunAts, cIDs,
		afterTenant, afterKey, kTenants, kKeys, p.Grace.Milliseconds())
	if p.MaxBytes <= 0 {
		c, err := readClaim(s.pool.SendBatch(ctx, &b), 0, 0)
		if err != nil {
			return Claimed{}, err
		}
		if err := s.readClaimedInputs(ctx, &c.Claimed); err != nil {
			return Claimed{}, err
		}
		return c.Claimed, nil
	}
	// With a budget the claim runs in a transaction of its own, so that
	// the jobs past the budget are released before it commits: nobody
	// ever sees them held for a worker that never got them.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return Claimed{}, fmt.Errorf("claim jobs: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	out, err := readClaim(tx.SendBatch(ctx, &b), p.MaxBytes, p.BytesUsed)
	if err != nil {
		return Claimed{}, err
	}
	if len(out.over) > 0 {
		ids, attempts, tokens := leaseArrays(out.over)
		rows, err := tx.Query(ctx, sqlReleaseJobs, ids, attempts, tokens, ReasonOverBudget)
		if err != nil {
			return Claimed{}, fmt.Errorf("claim jobs: release those past the budget: %w", err)
		}
		released, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (int64, error) {
			var id, woke int64
			err := row.Scan(&id, &woke)
			return id, err
		})
		if err != nil {
			return Claimed{}, fmt.Errorf("claim jobs: release those past the budget: %w", err)
		}
		if len(released) != len(out.over) {
			// They were claimed in this transaction: nothing else can
			// have changed them.
			return Claimed{}, fmt.Errorf("claim jobs: released %d of the %d jobs past the budget", len(released), len(out.over))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return Claimed{}, fmt.Errorf("claim jobs: commit: %w", err)
	}
	if err := s.readClaimedInputs(ctx, &out.Claimed); err != nil {
		return Claimed{}, err
	}
	return out.Claimed, nil
}

// claimRead is a claim's answer as read: what it returns, and the leases
// of the jobs past its budget.
type claimRead struct {
	Claimed
	over []Lease
}

// readClaim reads the answer of the claim batch (promote, claim) and
// closes br. Once the jobs read (and used, already held) would take more
// than maxBytes (0: no bound), the later jobs' payloads are dropped as
// they are read and only their leases kept.
func readClaim(br pgx.BatchResults, maxBytes, used int) (claimRead, error) {
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return claimRead{}, fmt.Errorf("claim jobs: promote: %w", unknownUnlessRefused(err))
	}
	rows, err := br.Query()
	if err != nil {
		return claimRead{}, fmt.Errorf("claim jobs: %w", unknownUnlessRefused(err))
	}
	defer rows.Close()
	var (
		out                  claimRead
		nextTenant, nextFkey *string
		busy, limited        *bool
		sc                   = newJobScanner(&nextTenant, &nextFkey, &busy, &limited)
		sawTrailer           bool
	)
	for rows.Next() {
		j, err := sc.scan(rows)
		if err != nil {
			return claimRead{}, fmt.Errorf("claim jobs: %w", &ClaimUnknownError{err})
		}
		if j.ID == 0 {
			// The trailer: where the next claim starts.
			sawTrailer = true
			if nextTenant != nil && nextFkey != nil {
				out.Next = &Unit{Tenant: *nextTenant, FairnessKey: *nextFkey}
			}
			out.Busy = busy != nil && *busy
			out.Limited = limited != nil && *limited
			continue
		}
		n := j.WireBytes()
		// In claim order: once one job does not fit, none after it is
		// returned either. A first job is kept whatever its size (a job
		// at the caps must still reach a worker).
		if maxBytes > 0 && (len(out.over) > 0 || used > 0 && used+n > maxBytes) {
			out.over = append(out.over, Lease{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken})
			continue
		}
		used += n
		out.Jobs = append(out.Jobs, j)
	}
	if err := rows.Err(); err != nil {
		return claimRead{}, fmt.Errorf("claim jobs: %w", unknownUnlessRefused(err))
	}
	if !sawTrailer {
		return claimRead{}, fmt.Errorf("claim jobs: the claim statement returned no trailer row")
	}
	rows.Close()
	if err := br.Close(); err != nil {
		// The statements are done: the commit, or the answer to it, failed.
		return claimRead{}, fmt.Errorf("claim jobs: %w", &ClaimUnknownError{err})
	}
	return out, nil
}

// ClaimUnknownError is a failed Claim that may have committed, its answer
// lost on the way (the connection broke after the claim was sent, or its
// commit's answer never came): jobs may be running under the claim's
// lease token that the caller never got. The store.ReleaseLostClaims of
// that token gives them back. A claim the server refused (an error it
// reported for one of the claim's statements, which aborts it) or that
// never reached it is not one.
type ClaimUnknownError struct{ Err error }

func (e *ClaimUnknownError) Error() string { return e.Err.Error() }
func (e *ClaimUnknownError) Unwrap() error { return e.Err }

// unknownUnlessRefused is err as a ClaimUnknownError, unless the server
// refused the statement (a *pgconn.PgError, which aborts the claim's
// transaction) or nothing was sent.
func unknownUnlessRefused(err error) error {
	var pgErr *pgconn.PgError
	var connectErr *pgconn.ConnectError
	if errors.As(err, &pgErr) || errors.As(err, &connectErr) || pgconn.SafeToRetry(err) {
		return err
	}
	return &ClaimUnknownError{err}
}

// readClaimedInputs reads the inputs of the claimed step jobs that carry
// them by reference, at most MaxClaimInputBytes of them; the jobs past
// that are given back unstarted, and leave the claim. (The claim
// statement itself is the same for every job: a claim of no such job
// runs nothing more.)
func (s *Store) readClaimedInputs(ctx context.Context, out *Claimed) error {
	over, err := s.readStepInputs(ctx, nil, out.Jobs, claimInputBudget)
	if err != nil {
		// The jobs are claimed and the caller does not get them: a
		// claimer gives them back (ReleaseLostClaims), or their leases
		// lapse and the rescuer does.
		return fmt.Errorf("claim jobs: %w", &ClaimUnknownError{err})
	}
	if len(over) == 0 {
		return nil
	}
	leases := make([]Lease, len(over))
	drop := make(map[int]bool, len(over))
	for k, i := range over {
		j := out.Jobs[i]
		leases[k], drop[i] = Lease{ID: j.ID, Attempt: j.Attempt, Token: j.LeaseToken}, true
	}
	if _, err := s.ReleaseJobs(ctx, leases, releasedForInputs); err != nil {
		return fmt.Errorf("claim jobs: give back jobs over the claim's input budget: %w", err)
	}
	kept := out.Jobs[:0]
	for i, j := range out.Jobs {
		if !drop[i] {
			kept = append(kept, j)
		}
	}
	out.Jobs = kept
	return nil
}

// ClaimJobs is Claim for a caller that keeps no place among the units
// (tests, one-off claims): it returns the claimed jobs only.
func (s *Store) ClaimJobs(ctx context.Context, p ClaimParams) ([]Job, error) {
	c, err := s.Claim(ctx, p)
	return c.Jobs, err
}

// unitArrays are units as the claim functions take them.
func unitArrays(units []Unit) (tenants, fkeys []string) {
	tenants, fkeys = make([]string, len(units)), make([]string, len(units))
	for i, u := range units {
		tenants[i], fkeys[i] = u.Tenant, u.FairnessKey
	}
	return tenants, fkeys
}
