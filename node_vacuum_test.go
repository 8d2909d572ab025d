package gaffer_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/internal/pgtest"
)

// A node without etcd runs the leader-only services itself, its vacuumer
// among them: once VacuumThreshold rows have died in gaffer.jobs, the
// table is vacuumed, here with autovacuum off for it.
func TestNodeVacuumsTheJobTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `ALTER TABLE gaffer.jobs SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	node, err := gaffer.NewNode(ctx, gaffer.Config{Pool: pool, VacuumThreshold: 500})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer node.Stop(ctx)

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`INSERT INTO gaffer.jobs (kind, queue) SELECT 'vacuum-test', 'nobody-works-it' FROM generate_series(1, 2000)`,
		`DELETE FROM gaffer.jobs WHERE kind = 'vacuum-test'`,
		`SELECT pg_stat_force_next_flush()`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	conn.Release()
	// Only that the vacuum ran, not what it removed: the node's own
	// sessions take snapshots, and a transaction running meanwhile in
	// another test's database holds their xmin back, and with it what a
	// vacuum here may remove (CI: all 2,000 rows left once). What a
	// vacuum removes is internal/maintenance's to test, with no other
	// session in its database.
	waitUntil(t, 15*time.Second, "the node to vacuum gaffer.jobs", func() bool {
		return scalar[int64](t, pool, `SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = 'gaffer.jobs'::regclass`) >= 1
	})
}
