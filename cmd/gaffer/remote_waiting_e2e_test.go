package main

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/workclient"
)

// transactions is the database's committed and rolled-back transactions
// so far (pg_stat_database).
func (e *remoteE2E) transactions() int64 {
	e.t.Helper()
	if _, err := e.pool.Exec(context.Background(), `SELECT pg_stat_clear_snapshot()`); err != nil {
		e.t.Fatal(err)
	}
	n, err := strconv.ParseInt(e.scalar(`SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()`), 10, 64)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// rate is the database's transactions per second over d.
func (e *remoteE2E) rate(d time.Duration) float64 {
	before, start := e.transactions(), time.Now()
	time.Sleep(d)
	return float64(e.transactions()-before) / time.Since(start).Seconds()
}

// Against a real `gaffer server`, over HTTP: claims waiting for work
// cost the database O(1), not O(claims) — 60 claims of 60 workers of a
// tenant, waiting on one queue, add at most a few transactions a second
// to the node's own (its claims of its queue, its heartbeats); a tenant
// may have --remote-max-waiting of them waiting, and the next one that
// finds nothing answers 429 too_many_waiting_claims; a worker's second
// claim replaces its waiting one, which answers at once marked
// "replaced". Red without the pollers (each claim claims its queue every
// second: 60 transactions a second more), without the cap (the 61st
// claim waits) or without the replacement (the first claim waits on).
func TestWaitingRemoteClaimsOnARealNode(t *testing.T) {
	t.Parallel()
	const k = 60
	e := newRemoteE2E(t, "--remote-max-wait", "30s", "--remote-max-waiting", strconv.Itoa(k))
	c := e.client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var workers []string
	for range k + 1 {
		w, err := c.Register(ctx, workclient.Registration{Queues: []string{"py"}})
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w.ID)
	}
	time.Sleep(11 * time.Second) // the registrations' statistics flushed (an idle backend's may come 10s late)
	base := e.rate(3 * time.Second)

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	answers := make([]chan workclient.Claimed, k)
	for i, w := range workers[:k] {
		answers[i] = make(chan workclient.Claimed, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Claim(ctx, w, 1, 25*time.Second)
			if err == nil {
				answers[i] <- got
			}
		}()
	}
	time.Sleep(11 * time.Second) // all waiting, their first looks flushed
	parked := e.rate(3 * time.Second)
	t.Logf("node alone: %.1f transactions/s; with %d claims waiting: %.1f", base, k, parked)
	if parked-base > 10 {
		t.Fatalf("%d waiting claims added %.1f transactions/s, want at most 10", k, parked-base)
	}
	for i := range answers {
		select {
		case got := <-answers[i]:
			t.Fatalf("claim %d answered %+v while it should wait", i, got)
		default:
		}
	}

	// One more of the tenant's workers may not wait.
	_, err := c.Claim(ctx, workers[k], 1, 25*time.Second)
	var p *workclient.Problem
	if !errors.As(err, &p) || p.Status != 429 || p.Code != "too_many_waiting_claims" {
		t.Fatalf("claim past the cap: %v, want 429 too_many_waiting_claims", err)
	}

	// A second claim of worker 0 replaces its waiting one.
	second := make(chan workclient.Claimed, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		got, err := c.Claim(ctx, workers[0], 1, 25*time.Second)
		if err == nil {
			second <- got
		}
	}()
	select {
	case got := <-answers[0]:
		if !got.Replaced || len(got.Jobs) != 0 {
			t.Fatalf("the replaced claim answered %+v, want empty and replaced", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first claim of worker 0 still waits after its second came")
	}

	// A job reaches one of the waiting claims at once.
	e.enqueue(1, `{"ms":1}`)
	start := time.Now()
	got := 0
	for got == 0 {
		for _, ch := range append([]chan workclient.Claimed{second}, answers[1:]...) {
			select {
			case a := <-ch:
				if len(a.Jobs) != 1 {
					t.Fatalf("a waiting claim answered %+v", a)
				}
				got++
			default:
			}
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("no waiting claim got the job")
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("the job reached a waiting claim %s after its enqueue", time.Since(start))
}
