package store_test

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// Every connection of the store — the LISTEN connection and the pool's,
// through which the listener proves its connection hears — terminated
// every 100 ms for 3 s, as a pooler recycling connections or an operator
// does: the listener is never deaf for long. Before, a probe sent through
// a terminated pool connection failed the new session, and each failure
// doubled the wait, up to 5 s without LISTEN.
func TestListenerRecoversFromRepeatedKills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, err := url.Parse(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	// Its own name: the tests run side by side on one server, and each
	// kills only its own connections.
	q := u.Query()
	q.Set("application_name", "killed-repeatedly")
	u.RawQuery = q.Encode()
	st, err := store.OpenWith(ctx, u.String(), store.ConnectOptions{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	killer := pgtest.NewStore(t) // another database: its own connections
	var connects, disconnects atomic.Int64
	l := st.NewListener(store.ListenerConfig{Channels: []string{store.ChannelJobs},
		OnConnect: func() { connects.Add(1) }, OnDisconnect: func() { disconnects.Add(1) }})
	l.Start(ctx)
	defer l.Stop()
	for deadline := time.Now().Add(10 * time.Second); !l.Connected(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the listener did not connect")
		}
	}
	// What one new session and its LISTEN take on this machine now (a
	// loaded one, the race detector): the listener may need a few of
	// them in a row while the kills go on, but not a backoff's seconds.
	var session time.Duration
	timing := *u
	tq := timing.Query()
	tq.Set("application_name", "timing")
	timing.RawQuery = tq.Encode()
	for range 3 {
		t0 := time.Now()
		c, err := pgx.Connect(ctx, timing.String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, "LISTEN gaffer_jobs"); err != nil {
			t.Fatal(err)
		}
		session = max(session, time.Since(t0))
		c.Close(ctx)
	}
	allowed := max(1500*time.Millisecond, 10*session)
	var longest, spell time.Duration
	last := time.Now()
	nextKill := time.Now()
	// 3 s of kills, and on a loaded machine more, until five reached
	// the listener.
	start := time.Now()
	for time.Since(start) < 3*time.Second || disconnects.Load() < 5 && time.Since(start) < 10*time.Second {
		time.Sleep(5 * time.Millisecond)
		now := time.Now()
		if l.Connected() {
			spell = 0
		} else {
			spell += now.Sub(last)
			longest = max(longest, spell)
		}
		last = now
		// Each kill lands on a listener that is listening (and on the
		// pool's connections with it): on a machine so loaded that a new
		// session takes longer than 100 ms, kills on a clock would end
		// every session before it listened, and no listener could pass.
		if now.After(nextKill) && l.Connected() {
			if _, err := killer.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'killed-repeatedly'`); err != nil {
				t.Fatal(err)
			}
			nextKill = now.Add(100 * time.Millisecond)
		}
	}
	if disconnects.Load() < 5 {
		t.Fatalf("the listener lost its connection %d times in %s of kills every 100 ms: the kills did not reach it", disconnects.Load(), time.Since(start).Round(time.Millisecond))
	}
	if longest > allowed {
		t.Fatalf("the listener was without LISTEN for %s at a stretch, where a session takes %s (%d connects, %d disconnects)",
			longest.Round(time.Millisecond), session.Round(time.Millisecond), connects.Load(), disconnects.Load())
	}
	t.Logf("%d connects, %d disconnects; longest without LISTEN %s", connects.Load(), disconnects.Load(), longest.Round(time.Millisecond))
}

// Every connection of the pool idle and terminated at once with the
// listen connection: the probe that proves the new LISTEN connection
// hears goes through the pool, and may meet each dead connection in turn
// before the pool opens a new one. The listener is back in well under a
// second: before, each dead connection failed a new session and doubled
// the wait (100 ms, 200 ms, ... 5 s).
func TestListenerBackAfterThePoolWasTerminated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, err := url.Parse(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", "killed-with-the-pool")
	u.RawQuery = q.Encode()
	st, err := store.OpenWith(ctx, u.String(), store.ConnectOptions{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	killer := pgtest.NewStore(t)
	l := st.NewListener(store.ListenerConfig{Channels: []string{store.ChannelJobs}})
	l.Start(ctx)
	defer l.Stop()
	for deadline := time.Now().Add(10 * time.Second); !l.Connected(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the listener did not connect")
		}
	}
	for round := range 3 {
		// All 8 of the pool's connections open and idle.
		var conns []*pgxpool.Conn
		for range 8 {
			c, err := st.Pool().Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Release()
		}
		if _, err := killer.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'killed-with-the-pool'`); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(2 * time.Second); l.Connected(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the listener did not notice its connection was terminated", round)
			}
		}
		lost := time.Now()
		for !l.Connected() {
			if time.Since(lost) > time.Second {
				t.Fatalf("round %d: the listener was still without LISTEN %s after its connection and the pool's were terminated", round, time.Since(lost).Round(time.Millisecond))
			}
			time.Sleep(time.Millisecond)
		}
	}
}
