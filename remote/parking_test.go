package remote_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/remote"
)

// parkedClaim is a claim running in the background.
type parkedClaim struct {
	done chan struct{}
	res  remote.ClaimResult
	err  error
}

// park starts c and returns once this node has one more claim waiting.
func (e *env) park(r *remote.Workers, c remote.Claim) *parkedClaim {
	e.t.Helper()
	before := r.Waiting()
	p := &parkedClaim{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.res, p.err = r.Claim(context.Background(), c)
	}()
	for deadline := time.Now().Add(10 * time.Second); r.Waiting() <= before; time.Sleep(2 * time.Millisecond) {
		select {
		case <-p.done:
			e.t.Fatalf("the claim answered %v %+v instead of waiting", p.err, p.res)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the claim did not wait for work")
		}
	}
	return p
}

// answered waits up to d for the claim's answer.
func (p *parkedClaim) answered(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// One claim of a worker waits at a time: a second one replaces the
// first, which answers at once, empty, marked Replaced; the second one
// then gets the work. Red with the replacement taken out of park (the
// first claim waits out its hour).
func TestOneWaitingClaimPerWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.newWorkers(remote.Config{MaxWait: time.Hour})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	c := remote.Claim{Tenant: "acme", Worker: w.ID, Max: 5, Wait: time.Hour}

	first := e.park(r, c)
	second := make(chan struct{})
	var res remote.ClaimResult
	var err error
	go func() {
		defer close(second)
		res, err = r.Claim(context.Background(), c)
	}()
	if !first.answered(10 * time.Second) {
		t.Fatal("the first claim still waits after a second claim of its worker came")
	}
	if first.err != nil || !first.res.Replaced || len(first.res.Jobs) != 0 {
		t.Fatalf("the replaced claim answered %v %+v, want empty and Replaced", first.err, first.res)
	}
	if n := r.Waiting(); n != 1 {
		t.Fatalf("%d claims waiting, want the second one alone", n)
	}
	j := e.enqueue(job.Request{Kind: "k", Tenant: "acme"})
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the second claim did not get the job")
	}
	if err != nil || res.Replaced || len(res.Jobs) != 1 || res.Jobs[0].ID != j.ID {
		t.Fatalf("the second claim answered %v %+v", err, res)
	}
}

// A tenant may have MaxWaitingPerTenant claims waiting on a node: past
// it a claim that finds nothing answers ErrTooManyWaiting at once, while
// one that finds a job still takes it, and another tenant's claims still
// wait. Once one of the tenant's claims stops waiting, another may.
// Red without the cap (the fourth claim waits).
func TestWaitingClaimsAreCappedPerTenant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.newWorkers(remote.Config{MaxWait: time.Hour, MaxWaitingPerTenant: 3})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var parked []*parkedClaim
	var workers []string
	for range 4 {
		workers = append(workers, e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"acme-q"}}).ID)
	}
	for _, w := range workers[:3] {
		parked = append(parked, e.park(r, remote.Claim{Tenant: "acme", Worker: w, Max: 1, Wait: time.Hour}))
	}
	start := time.Now()
	short, stop := context.WithTimeout(ctx, 5*time.Second) // a claim that waits answers empty at 5s
	res, err := r.Claim(short, remote.Claim{Tenant: "acme", Worker: workers[3], Max: 1, Wait: time.Hour})
	stop()
	if !errors.Is(err, remote.ErrTooManyWaiting) || len(res.Jobs) != 0 {
		t.Fatalf("a fourth waiting claim of the tenant: %v %+v, want ErrTooManyWaiting", err, res)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("refused after %s, want at once", d)
	}
	other := e.register(r, remote.Registration{Tenant: "globex", Queues: []string{"acme-q"}})
	e.park(r, remote.Claim{Tenant: "globex", Worker: other.ID, Max: 1, Wait: time.Hour})

	// Work for the claim that may not wait: it takes it rather than be
	// refused (one of the waiting claims may take another, woken).
	e.enqueue(job.Request{Kind: "k", Tenant: "acme", Queue: "acme-q"})
	e.enqueue(job.Request{Kind: "k", Tenant: "acme", Queue: "acme-q"})
	e.enqueue(job.Request{Kind: "k", Tenant: "acme", Queue: "acme-q"})
	e.enqueue(job.Request{Kind: "k", Tenant: "acme", Queue: "acme-q"})
	res, err = r.Claim(ctx, remote.Claim{Tenant: "acme", Worker: workers[3], Max: 1, Wait: time.Hour})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("a claim over the cap with work due: %v %+v, want the job", err, res)
	}
	// The jobs woke the waiting claims: each took one and stopped waiting,
	// so the fourth worker may wait now.
	for i, p := range parked {
		if !p.answered(10*time.Second) || p.err != nil || len(p.res.Jobs) != 1 {
			t.Fatalf("waiting claim %d: %v %+v", i, p.err, p.res)
		}
	}
	e.park(r, remote.Claim{Tenant: "acme", Worker: workers[3], Max: 1, Wait: time.Hour})
}

// K claims waiting on one queue of a tenant, each of a worker with
// MaxQueues queues, cost the database one look a poll interval, not a
// claim of every queue of every claim: its committed transactions per
// second (pg_stat_database, this test's own database) stay under a bound
// that does not grow with K. Logs the figures (go test ./remote -run
// TestWaitingClaimsCostOnePoll -v). Red with each claim polling its
// queues itself (before the pollers: 30 claims made 973 transactions a
// second, 100 made 3,013 on the author's machine).
func TestWaitingClaimsCostOnePoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.newWorkers(remote.Config{MaxWait: time.Hour, PollInterval: time.Second})
	queues := make([]string, remote.MaxQueues)
	for i := range queues {
		queues[i] = fmt.Sprintf("q%02d", i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var claims sync.WaitGroup
	defer claims.Wait()
	defer cancel()
	parked := 0
	for _, k := range []int{30, 100} {
		for ; parked < k; parked++ {
			w := e.register(r, remote.Registration{Tenant: "acme", Queues: queues})
			claims.Add(1)
			go func() {
				defer claims.Done()
				r.Claim(ctx, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 1, Wait: time.Hour})
			}()
		}
		for deadline := time.Now().Add(30 * time.Second); r.Waiting() < k; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d claims waiting", r.Waiting(), k)
			}
		}
		// Each claim parks before its first look: let those end, and the
		// database's statistics catch up (an idle backend flushes its
		// counts up to 10s late: the registrations' would land in the
		// window).
		time.Sleep(11 * time.Second)
		before, err := e.st.TransactionCount(ctx)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.Sleep(3 * time.Second)
		after, err := e.st.TransactionCount(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rate := float64(after-before) / time.Since(start).Seconds()
		t.Logf("%d claims waiting, %d queues each: %.1f transactions/s", k, len(queues), rate)
		// One look a second, the two statements that count, and room for
		// the listener and a loaded machine.
		if rate > 15 {
			t.Fatalf("%d waiting claims drove %.1f transactions/s, want at most 15 whatever their number", k, rate)
		}
		if n := r.Waiting(); n != k {
			t.Fatalf("%d claims waiting, want %d", n, k)
		}
	}
}

// A due job reaches a claim waiting among many within milliseconds of
// its notification, and a job made due without one (its run_at reached,
// nobody told) within the poll interval. Red with the poller's
// notification path (WakeQueue) or its timer taken out.
func TestWaitingClaimsGetWorkPromptly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const poll = 5 * time.Second
	r := e.newWorkers(remote.Config{MaxWait: time.Hour, PollInterval: poll})
	var parked []*parkedClaim
	for range 20 {
		w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default", "other"}})
		parked = append(parked, e.park(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 1, Wait: time.Hour}))
	}
	answered := func() *parkedClaim {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			for i, p := range parked {
				select {
				case <-p.done:
					parked = append(parked[:i], parked[i+1:]...)
					return p
				default:
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("no waiting claim answered")
			}
			time.Sleep(time.Millisecond)
		}
	}

	j := e.enqueue(job.Request{Kind: "k", Tenant: "acme"})
	start := time.Now()
	p := answered()
	took := time.Since(start)
	if p.err != nil || len(p.res.Jobs) != 1 || p.res.Jobs[0].ID != j.ID {
		t.Fatalf("after an insert: %v %+v", p.err, p.res)
	}
	t.Logf("notified job claimed %s after its enqueue committed", took)
	if took > poll/4 { // a few ms on an idle machine; room for a loaded one
		t.Fatalf("a notified job reached a waiting claim after %s, want well within the poll (%s)", took, poll)
	}

	late := e.enqueue(job.Request{Kind: "k", Tenant: "acme", Queue: "other", Delay: time.Hour})
	e.exec(`UPDATE gaffer.jobs SET run_at = now() WHERE id = $1`, late.ID) // due, and nobody told
	start = time.Now()
	p = answered()
	took = time.Since(start)
	if p.err != nil || len(p.res.Jobs) != 1 || p.res.Jobs[0].ID != late.ID {
		t.Fatalf("after a job became due unannounced: %v %+v", p.err, p.res)
	}
	t.Logf("unannounced job claimed %s after it became due", took)
	if took > poll*11/10+200*time.Millisecond {
		t.Fatalf("an unannounced job reached a waiting claim after %s, want within the poll interval %s", took, poll)
	}
}

// Concurrent registrations never take a tenant past MaxPerTenant: of 50
// at once with a cap of 10, ten succeed and the rest answer
// ErrTooManyWorkers, and the tenant holds ten rows. Red with the tenant's
// lock taken out of RegisterRemoteWorker (count-then-insert under READ
// COMMITTED let more through).
func TestConcurrentRegistrationsKeepTheCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const n = 50
	// A pool of its own, as large as the burst: the registrations race in
	// the database, not in the pool's queue.
	pc := e.st.Pool().Config().Copy()
	pc.MaxConns = n
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var conns []*pgxpool.Conn
	for range n { // connected before the burst, so that it is one
		c, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	r, err := remote.NewWorkers(remote.Config{Pool: pool, MaxPerTenant: 10})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	startGun := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGun
			_, errs[i] = r.Register(context.Background(), remote.Registration{Tenant: "acme", Queues: []string{"default"}})
		}()
	}
	close(startGun)
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, remote.ErrTooManyWorkers):
			t.Fatalf("register: %v", err)
		}
	}
	rows := e.count(`SELECT count(*) FROM gaffer.nodes WHERE kind = 'remote' AND tenant = 'acme'`)
	if ok != 10 || rows != 10 {
		t.Fatalf("%d registrations succeeded, %d rows, want 10 and 10", ok, rows)
	}
}
