package patroni

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/internal/etcdserver"
)

// TestFailover: killing the primary promotes the synchronous standby,
// which then has every row the primary acknowledged.
func TestFailover(t *testing.T) {
	Require(t)
	ctx := context.Background()
	etcd, err := etcdserver.Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	c, err := Start(ctx, Config{Etcd: []string{etcd.Endpoint()}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			for _, m := range c.Members {
				t.Logf("%s log:\n%s", m.Name, m.Log())
			}
		}
		c.Stop()
	}()
	primary, err := c.WaitPrimary(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("primary %s; %s", primary.Name, c.Describe(ctx))
	conn, err := pgx.Connect(ctx, c.URL("postgres", "target_session_attrs=read-write"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE t (id int)`); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := conn.Exec(ctx, `INSERT INTO t VALUES ($1)`, i); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)
	start := time.Now()
	primary.Kill()
	next, err := c.WaitPrimary(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s promoted %s after the kill", next.Name, time.Since(start).Round(time.Millisecond))
	conn, err = pgx.Connect(ctx, c.URL("postgres", "target_session_attrs=read-write"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 100 {
		t.Fatalf("after failover: %d rows, %v; want 100", n, err)
	}
}
