package gaffer_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cron"
)

// G4: an "@every 1s" entry under policy "all", for 60 seconds, through two
// leader failovers — one leader SIGKILLed just before a fire, the next
// SIGSTOPped past its TTL and resumed — yields exactly 60 occurrences,
// each with one job: none twice, none missing.
func TestCronExactlyOnceThroughFailovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newClusterEnv(t, 2*time.Second)
	nodes := map[string]*child{}
	for _, id := range []string{"node-1", "node-2", "node-3"} {
		nodes[id] = e.node(id)
	}
	waitUntil(t, 15*time.Second, "a leader", func() bool { return e.fence().Leader != "" })
	crons := cron.NewClient(e.pool)
	entry, err := crons.Create(ctx, cron.Entry{Name: "tick", Schedule: "@every 1s", Missed: cron.MissedAll,
		Job: cron.JobTemplate{Kind: "work", Args: []byte(`{"ms": 1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	// Create answers with the entry as it reads back: if the leader fired
	// the first occurrence before that read (a loaded machine), the entry
	// already points at the second. The first instant is the earliest.
	first := entry.NextRunAt
	if fired := scalar[*time.Time](t, e.pool, `SELECT min(scheduled_at) FROM gaffer.cron_occurrences WHERE entry = 'tick'`); fired != nil && fired.Before(first) {
		first = *fired
	}
	last := first.Add(59 * time.Second)
	cursor := func() time.Time {
		return scalar[time.Time](t, e.pool, `SELECT next_run_at FROM gaffer.cron_entries WHERE name = 'tick'`)
	}
	leader := func() *child { return nodes[e.fence().Leader] }

	// Failover 1, at about 15s: SIGKILL the leader 100ms before a fire.
	time.Sleep(15 * time.Second)
	next := cursor()
	dbNow := scalar[time.Time](t, e.pool, `SELECT now()`)
	time.Sleep(next.Sub(dbNow) - 100*time.Millisecond)
	first1 := e.fence()
	leader().Signal(syscall.SIGKILL)
	t.Logf("killed leader %s 100ms before the %s fire", first1.Leader, next.Format("15:04:05.000"))
	waitUntil(t, 15*time.Second, "a new leader", func() bool { return e.fence().Epoch > first1.Epoch })

	// Failover 2, at about 35s: SIGSTOP the new leader for 2×TTL, then resume it.
	time.Sleep(time.Until(first.Add(35 * time.Second)))
	second := e.fence()
	stopped := leader()
	stopped.Signal(syscall.SIGSTOP)
	t.Logf("stopped leader %s", second.Leader)
	waitUntil(t, 15*time.Second, "a third leader", func() bool { return e.fence().Epoch > second.Epoch })
	time.Sleep(time.Until(time.Now().Add(2 * e.ttl)))
	stopped.Signal(syscall.SIGCONT)

	waitUntil(t, 40*time.Second, "the 60th occurrence to be handled", func() bool { return cursor().After(last) })
	fired := scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.cron_occurrences WHERE entry = 'tick' AND scheduled_at BETWEEN $1 AND $2 AND status = 'fired'`, first, last)
	other := scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.cron_occurrences WHERE entry = 'tick' AND status <> 'fired'`)
	jobs := scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = 'tick' AND cron_at BETWEEN $1 AND $2`, first, last)
	distinct := scalar[int](t, e.pool, `SELECT count(DISTINCT cron_at) FROM gaffer.jobs WHERE cron_entry = 'tick' AND cron_at BETWEEN $1 AND $2`, first, last)
	epochs := scalar[int](t, e.pool, `SELECT count(DISTINCT epoch) FROM gaffer.cron_occurrences WHERE entry = 'tick' AND scheduled_at BETWEEN $1 AND $2`, first, last)
	var p50, p99, worst float64
	e.pool.QueryRow(ctx, `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY l), percentile_cont(0.99) WITHIN GROUP (ORDER BY l), max(l)
		FROM (SELECT extract(epoch FROM j.created_at - o.scheduled_at) * 1000 AS l FROM gaffer.cron_occurrences o
		      JOIN gaffer.jobs j ON j.id = o.job_id WHERE o.entry = 'tick' AND o.scheduled_at BETWEEN $1 AND $2) x`, first, last).Scan(&p50, &p99, &worst)
	t.Logf("60 instants: %d fired, %d jobs (%d distinct), %d not fired; %d leader epochs; lateness p50 %.0fms p99 %.0fms max %.0fms (catch-up after failover included)",
		fired, jobs, distinct, other, epochs, p50, p99, worst)
	if fired != 60 || jobs != 60 || distinct != 60 || other != 0 {
		t.Fatalf("want exactly 60 fired occurrences with one job each")
	}
	if epochs < 3 {
		t.Fatalf("occurrences were fired under %d epochs; the failovers did not happen as planned", epochs)
	}
	if n := scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE cron_entry = 'tick' AND cron_at IS NOT NULL AND (cron_at < $1 OR extract(milliseconds FROM cron_at - $1)::int % 1000 <> 0)`, first); n != 0 {
		t.Fatalf("%d jobs at instants off the schedule", n)
	}
}
