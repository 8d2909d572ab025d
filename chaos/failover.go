package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gafferhq/gaffer/internal/faultproxy"
	"github.com/gafferhq/gaffer/internal/patroni"
)

// patroniDB is PostgreSQL as the profiles with pg-failover run it: a
// primary and a synchronous standby managed by Patroni, which keeps its
// state in the suite's own 3-member etcd.
type patroniDB struct {
	c *patroni.Cluster
}

func startPatroni(t *testing.T, etcd []string) *patroniDB {
	t.Helper()
	patroni.Require(t)
	// A leader lock TTL past the etcd-stop fault's 6s, so that an etcd
	// member stopping does not demote the primary by itself.
	c, err := patroni.Start(context.Background(), patroni.Config{Etcd: etcd, Scope: "chaos", TTL: 15 * time.Second,
		Settings: map[string]string{"fsync": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, m := range c.Members {
				t.Logf("patroni %s:\n%s", m.Name, m.Log())
			}
		}
		c.Stop()
	})
	return &patroniDB{c: c}
}

// url names every member; only the primary takes the connection.
func (d *patroniDB) url() string { return d.c.URL("postgres", "target_session_attrs=read-write") }

func (d *patroniDB) addrs() []string {
	var out []string
	for _, m := range d.c.Members {
		out = append(out, fmt.Sprintf("127.0.0.1:%d", m.Port))
	}
	return out
}

// crashPrimary kills the primary's PostgreSQL (Patroni lives on and
// starts it again), and returns once it takes writes and has its
// synchronous standby back.
func (d *patroniDB) crashPrimary(h *harness) {
	ctx := context.Background()
	p, err := d.c.WaitPrimary(ctx, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	p.CrashPostgres()
	if _, err := d.c.WaitPrimary(ctx, nil); err != nil {
		h.t.Fatal(err)
	}
	if err := d.c.WaitReplicas(ctx); err != nil {
		h.t.Fatal(err)
	}
}

// failover SIGKILLs the primary's Patroni and PostgreSQL, waits for the
// standby's promotion, then starts the dead member again and waits until
// it is the synchronous standby, so that the next failover loses nothing
// either.
func (d *patroniDB) failover(h *harness) {
	ctx := context.Background()
	p, err := d.c.WaitPrimary(ctx, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	start := time.Now()
	p.Kill()
	next, err := d.c.WaitPrimary(ctx, p)
	if err != nil {
		h.t.Fatal(err)
	}
	promoted := time.Since(start)
	if err := d.c.Restart(p); err != nil {
		h.t.Fatal(err)
	}
	if err := d.c.WaitReplicas(ctx); err != nil {
		h.t.Fatal(err)
	}
	h.logf("postgres failover: killed primary %s, %s promoted after %s, %s synchronous standby again after %s",
		p.Name, next.Name, promoted.Round(time.Millisecond), p.Name, time.Since(start).Round(time.Millisecond))
}

// pgPaths are a node's fault proxies, one to each PostgreSQL server.
type pgPaths []*faultproxy.Proxy

func (p pgPaths) Set(m faultproxy.Mode) {
	for _, x := range p {
		x.Set(m)
	}
}

func (p pgPaths) SetLatency(d time.Duration) {
	for _, x := range p {
		x.SetLatency(d)
	}
}

// url is the node's database URL: every proxy, in the servers' order.
// With one the node connects as before; with several it connects to
// whichever server accepts writes (a multi-host URL is read-write unless
// it says otherwise).
func (p pgPaths) url() string {
	var hosts []string
	for _, x := range p {
		hosts = append(hosts, x.Addr())
	}
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", strings.Join(hosts, ","))
}
