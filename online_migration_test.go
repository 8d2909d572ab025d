package gaffer_test

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// withIndexMigration is Gaffer's migration set plus one more, numbered
// after the last, whose up and down files are given.
func withIndexMigration(t *testing.T, up, down string) fs.FS {
	t.Helper()
	fsys := fstest.MapFS{}
	files := store.MigrationFiles()
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := fs.ReadFile(files, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		fsys[e.Name()] = &fstest.MapFile{Data: data}
	}
	name := fmt.Sprintf("%04d_jobs_unique_key_lookup", store.LatestVersion()+1)
	fsys[name+".up.sql"] = &fstest.MapFile{Data: []byte(up)}
	fsys[name+".down.sql"] = &fstest.MapFile{Data: []byte(down)}
	return fsys
}

// jobLoad records how long each enqueue took, and how late each job due
// at a set instant started.
type jobLoad struct {
	mu       sync.Mutex
	enqueues []span
	claims   []span // from the job's run_at to its handler starting
}

type span struct{ begin, end time.Time }

// window is what the load saw while a migration ran.
type window struct {
	took                 time.Duration
	enqueues, claims     int
	maxEnqueue, maxClaim time.Duration
}

// during returns the slowest enqueue that overlapped [from, to], and the
// latest start of a job that fell due in [from, to]. Call it once every
// such job has started.
func (l *jobLoad) during(from, to time.Time) window {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := window{took: to.Sub(from)}
	for _, op := range l.enqueues {
		if !op.end.Before(from) && !op.begin.After(to) {
			w.enqueues++
			w.maxEnqueue = max(w.maxEnqueue, op.end.Sub(op.begin))
		}
	}
	for _, c := range l.claims {
		if !c.begin.Before(from) && !c.begin.After(to) {
			w.claims++
			w.maxClaim = max(w.maxClaim, c.end.Sub(c.begin))
		}
	}
	return w
}

// An index migration on a big gaffer.jobs table, written the online way
// (-- gaffer:no-transaction, CREATE INDEX CONCURRENTLY), blocks no enqueue
// and no claim for as long as a second while a node works jobs. The same
// index built by a plain CREATE INDEX in a transaction is run first, on
// the same table under the same load, and must block them for more than
// a second: that shows the table is big enough for the online run to
// mean something. Red with the online migration's marker removed (its
// CONCURRENTLY build then fails in a transaction), or with it written as
// the plain one.
func TestOnlineIndexMigrationBlocksNoEnqueueOrClaim(t *testing.T) {
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	pool := openPool(t, url)
	// 2M finished jobs, each with its own unique key: a plain build of an
	// index on them takes about 2.5s on a 2-core machine.
	const rows = 2_000_000
	fillStart := time.Now()
	if _, err := pool.Exec(ctx, `INSERT INTO gaffer.jobs (kind, state, attempt, finalized_at, unique_key)
		SELECT 'filler', 'completed', 1, now(), 'order-' || md5(g::text) FROM generate_series(1, $1) g`, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE gaffer.jobs`); err != nil {
		t.Fatal(err)
	}
	t.Logf("filled gaffer.jobs with %d rows in %s", rows, time.Since(fillStart).Round(time.Millisecond))

	load := &jobLoad{}
	// A short poll: a job scheduled for an instant is claimed within
	// 100ms of it, unless its claim is blocked.
	node, err := gaffer.NewNode(ctx, gaffer.Config{Pool: pool, ID: "online-1", Queues: map[string]int{"default": 10},
		PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	node.HandleFunc("enqueued", func(ctx context.Context, j *job.Job) error { return nil })
	node.HandleFunc("due", func(ctx context.Context, j *job.Job) error {
		load.mu.Lock()
		load.claims = append(load.claims, span{j.RunAt, time.Now()})
		load.mu.Unlock()
		return nil
	})
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer node.Stop(ctx)
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for loadCtx.Err() == nil {
				begin := time.Now()
				_, err := node.Client().Enqueue(loadCtx, job.Request{Kind: "enqueued"})
				if err != nil {
					if loadCtx.Err() == nil {
						t.Errorf("enqueue: %v", err)
					}
					return
				}
				load.mu.Lock()
				load.enqueues = append(load.enqueues, span{begin, time.Now()})
				load.mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	defer func() { stopLoad(); wg.Wait() }()

	// The migration runs from its own pool, as `gaffer migrate up` would.
	migratePool := openPool(t, url)
	migrate := func(name, up, down string) (*store.Migrator, window) {
		t.Helper()
		m, err := store.NewMigrator(migratePool, withIndexMigration(t, up, down))
		if err != nil {
			t.Fatal(err)
		}
		// Jobs falling due every 25ms over the next 10s: whatever the
		// migration's length, some fall due while it runs.
		base := time.Now().Add(300 * time.Millisecond)
		due := make([]job.Request, 400)
		for i := range due {
			due[i] = job.Request{Kind: "due", RunAt: base.Add(time.Duration(i) * 25 * time.Millisecond)}
		}
		if _, err := node.Client().EnqueueMany(ctx, due); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		from := time.Now()
		done, err := m.Up(ctx)
		to := time.Now()
		if err != nil || len(done) != 1 {
			t.Fatalf("%s: migrate up: %v, %v", name, done, err)
		}
		waitUntil(t, 30*time.Second, "every job due during the migration to start", func() bool {
			return scalar[int](t, pool, `SELECT count(*) FROM gaffer.jobs WHERE kind = 'due' AND run_at <= $1 AND state <> 'completed'`, to) == 0
		})
		w := load.during(from, to)
		t.Logf("%s: migrate up took %s; %d enqueues, the slowest took %s; %d jobs fell due, the latest started %s after its run_at",
			name, w.took.Round(time.Millisecond), w.enqueues, w.maxEnqueue.Round(time.Millisecond), w.claims, w.maxClaim.Round(time.Millisecond))
		return m, w
	}

	plain, w := migrate("plain CREATE INDEX in a transaction",
		"CREATE INDEX jobs_unique_key_lookup_idx ON gaffer.jobs (tenant, unique_key);\n",
		"DROP INDEX gaffer.jobs_unique_key_lookup_idx;\n")
	if w.maxEnqueue < time.Second || w.maxClaim < time.Second {
		t.Fatalf("the plain build blocked enqueues for at most %s and claims for %s: the table is too small for this test to show anything",
			w.maxEnqueue, w.maxClaim)
	}
	if _, err := plain.Down(ctx, 1); err != nil {
		t.Fatal(err)
	}

	_, w = migrate("online",
		"-- gaffer:no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_unique_key_lookup_idx ON gaffer.jobs (tenant, unique_key);\n",
		"-- gaffer:no-transaction\nDROP INDEX CONCURRENTLY IF EXISTS gaffer.jobs_unique_key_lookup_idx;\n")
	if w.maxEnqueue >= time.Second || w.maxClaim >= time.Second {
		t.Errorf("during the online migration an enqueue took %s and a due job started %s late: want both under 1s", w.maxEnqueue, w.maxClaim)
	}
	if w.enqueues < 50 || w.claims < 50 {
		t.Errorf("only %d enqueues and %d jobs due during the online migration: the load did not overlap it", w.enqueues, w.claims)
	}
	if !scalar[bool](t, pool, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'gaffer.jobs_unique_key_lookup_idx'::regclass`) {
		t.Error("the online migration's index is not valid")
	}
}
