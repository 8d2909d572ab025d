package gaffer_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/cron"
)

// G10/G13 for cron: one tenant's hundreds of per-second entries do not
// make another tenant's entry late. A real node process leads (etcd
// election, fenced firings) with cron unmetered, so that only the
// scheduler's round-robin by tenant stands between the two; tenant "hog"
// has 500 entries firing every second (made by an operator's client, so
// no quota refuses them — as entries from before the quotas would be),
// tenant "victim" one. Over 12 seconds, the victim's occurrences fire
// with p99 lateness under 250 ms (its usual lateness alone is a few ms).
//
// GAFFER_BENCH_CRON_ENTRIES changes the hog's entry count, and
// GAFFER_BENCH_CRON_SECONDS the measured time; the figures are logged
// (scripts/bench-cron-fairness.sh).
func TestCronOneTenantsEntriesDoNotDelayAnothers(t *testing.T) {
	ctx := context.Background()
	entries, seconds := envInt("GAFFER_BENCH_CRON_ENTRIES", 500), envInt("GAFFER_BENCH_CRON_SECONDS", 12)
	e := newClusterEnv(t, 2*time.Second)
	e.node("node-1", "GAFFER_TEST_CRON_FIRE_RATE=-1")
	waitUntil(t, 15*time.Second, "a leader", func() bool { return e.fence().Leader != "" })
	crons := cron.NewClient(e.pool)
	// The hog's jobs go to a queue no node works: the measure is the
	// scheduler's, not the workers'.
	for i := range entries {
		if _, err := crons.Create(ctx, cron.Entry{Tenant: "hog", Name: fmt.Sprintf("hog-%03d", i), Schedule: "* * * * * *",
			Job: cron.JobTemplate{Kind: "noop", Queue: "hog"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := crons.Create(ctx, cron.Entry{Tenant: "victim", Name: "tick", Schedule: "* * * * * *",
		Job: cron.JobTemplate{Kind: "noop", Queue: "victim"}}); err != nil {
		t.Fatal(err)
	}
	// Two seconds for the hog's backlog to build, then measure.
	from := scalar[time.Time](t, e.pool, `SELECT date_trunc('second', now()) + interval '2 seconds'`)
	to := from.Add(time.Duration(seconds) * time.Second)
	time.Sleep(time.Until(to))
	waitUntil(t, 30*time.Second, "the victim's last measured occurrence to be handled", func() bool {
		return scalar[time.Time](t, e.pool, `SELECT next_run_at FROM gaffer.cron_entries WHERE tenant = 'victim'`).After(to.Add(-time.Second))
	})
	// Per occurrence of the victim: its lateness, and how many of the
	// hog's firings (one transaction each, told apart by entry and
	// transaction time) committed between its instant and its job.
	rows, err := e.pool.Query(ctx, `SELECT v.cron_at, extract(epoch FROM v.created_at - v.cron_at) * 1000,
		(SELECT count(DISTINCT (h.cron_entry, h.created_at)) FROM gaffer.jobs h WHERE h.tenant = 'hog' AND h.id < v.id AND h.created_at >= v.cron_at)
		FROM gaffer.jobs v WHERE v.tenant = 'victim' AND v.cron_at >= $1 AND v.cron_at < $2 ORDER BY v.cron_at`, from, to)
	if err != nil {
		t.Fatal(err)
	}
	var late []float64
	worstAhead := 0
	for rows.Next() {
		var at time.Time
		var l float64
		var ahead int
		if err := rows.Scan(&at, &l, &ahead); err != nil {
			t.Fatal(err)
		}
		late = append(late, l)
		worstAhead = max(worstAhead, ahead)
		t.Logf("victim %s: %4.0fms late, %3d hog firings ahead of it", at.Format("15:04:05"), l, ahead)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(late)
	pct := func(p float64) float64 {
		if len(late) == 0 {
			return 0
		}
		return late[min(len(late)-1, int(p*float64(len(late))))]
	}
	hogJobs := scalar[int](t, e.pool, `SELECT count(*) FROM gaffer.jobs WHERE tenant = 'hog' AND created_at >= $1 AND created_at < $2`, from, to)
	missed := scalar[int](t, e.pool, `SELECT coalesce(sum(count), 0) FROM gaffer.cron_occurrences WHERE tenant = 'victim' AND status = 'missed'`)
	t.Logf("hog: %d per-second entries, %.0f jobs/s; victim: %d occurrences in %ds, lateness p50 %.0fms p99 %.0fms max %.0fms, at most %d hog firings ahead, %d missed",
		entries, float64(hogJobs)/float64(seconds), len(late), seconds, pct(0.5), pct(0.99), pct(1), worstAhead, missed)
	if len(late) != seconds || missed > 0 {
		hist, _ := e.pool.Query(ctx, `SELECT scheduled_at, status, coalesce(reason, ''), count, recorded_at, coalesce(job_id, 0)
			FROM gaffer.cron_occurrences WHERE tenant = 'victim' ORDER BY scheduled_at`)
		for hist.Next() {
			var at, rec time.Time
			var status, reason string
			var n int
			var id int64
			hist.Scan(&at, &status, &reason, &n, &rec, &id)
			t.Logf("victim history: %s %s %q ×%d recorded %s job %d", at.Format("15:04:05.000"), status, reason, n, rec.Format("15:04:05.000"), id)
		}
		hist.Close()
		t.Fatalf("the victim's entry fired %d times in %ds (%d missed)", len(late), seconds, missed)
	}
	// One turn: what is left of the batch the scheduler read before the
	// victim fell due (cron's turnBatch, 16, fired 8 to a transaction),
	// then at most one hog entry before the victim's in the next batch
	// (each tenant's earliest first).
	if worstAhead > 17 {
		t.Fatalf("up to %d of another tenant's firings went ahead of the victim's due entry; want at most one turn (17)", worstAhead)
	}
	// The lateness that follows: one turn of firings, a few ms each. On
	// an idle machine p99 is a few tens of ms; a starved one stalls the
	// whole scheduler, fair or not (see docs/cron.md).
	if pct(0.5) >= 250 {
		t.Fatalf("the victim's median lateness is %.0fms beside %d per-second entries of another tenant; want < 250ms", pct(0.5), entries)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
