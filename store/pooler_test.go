package store_test

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/gafferhq/gaffer/internal/pgbouncer"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// throughPgBouncer makes a database and a PgBouncer in transaction mode in
// front of it with two server connections, and returns the direct URL and
// the pooled one.
func throughPgBouncer(t *testing.T) (direct, pooled string) {
	t.Helper()
	pgbouncer.Require(t)
	direct = pgtest.NewDatabase(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pgbouncer.Start(context.Background(), pgbouncer.Config{Target: u.Host, PoolSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return direct, b.URL(strings.TrimPrefix(u.Path, "/"))
}

// poolerWorkload runs enqueues, reads and transactions from eight
// goroutines sharing two server connections, and returns the first error.
func poolerWorkload(st *store.Store) error {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				res, err := st.InsertJob(ctx, nil, params("pooled"))
				if err == nil {
					_, err = st.GetJob(ctx, "default", res.Job.ID)
				}
				if err == nil {
					err = st.InTx(ctx, func(tx pgx.Tx) error {
						if _, err := st.InsertJob(ctx, tx, params("pooled")); err != nil {
							return err
						}
						_, err := st.InsertJob(ctx, tx, params("pooled"))
						return err
					})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// Through PgBouncer in transaction mode, a store opened with
// TransactionPooler prepares no statement: eight clients on two server
// connections enqueue, read and run transactions without an error. The
// same workload on a store opened as for a direct connection fails (pgx's
// cached prepared statements meet server connections that never saw them),
// which shows the workload would catch it.
func TestTransactionPoolerPreparesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pooled := throughPgBouncer(t)
	st, err := store.OpenWith(ctx, pooled, store.ConnectOptions{MaxConns: 8, TransactionPooler: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !strings.Contains(strings.Join(st.Notes(), "\n"), "not prepared") {
		t.Errorf("notes do not say statements are not prepared: %q", st.Notes())
	}
	if err := poolerWorkload(st); err != nil {
		t.Fatalf("through a transaction pooler: %v", err)
	}

	// As for a direct connection: PgBouncer refuses the jit parameter
	// (the store connects again without it, and says so), then prepared
	// statements break.
	plain, err := store.OpenWith(ctx, pooled, store.ConnectOptions{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if !strings.Contains(strings.Join(plain.Notes(), "\n"), "refused the jit startup parameter") {
		t.Errorf("notes do not tell of the refused jit parameter: %q", plain.Notes())
	}
	err = poolerWorkload(plain)
	if err == nil || !strings.Contains(err.Error(), "prepared statement") {
		t.Fatalf("with prepared statements through a transaction pooler: %v; want a prepared statement error", err)
	}
	t.Logf("as expected, prepared statements fail through the pooler: %v", err)
}

// A LISTEN connection through a transaction pooler hears nothing: the
// listener finds out with its probe and says why (ErrListenDeaf) instead of
// calling itself connected. Given a direct URL of its own, it hears what
// is sent through the pooled pool.
func TestListenerThroughTransactionPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct, pooled := throughPgBouncer(t)
	defer store.SetListenProbeTimeout(time.Second)()
	st, err := store.OpenWith(ctx, pooled, store.ConnectOptions{MaxConns: 4, TransactionPooler: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	var logs lockedBuffer
	deaf := st.NewListener(store.ListenerConfig{Channels: []string{store.ChannelJobs},
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})})
	deaf.Start(ctx)
	defer deaf.Stop()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(logs.String(), "cannot carry LISTEN") {
		if time.Now().After(deadline) {
			t.Fatalf("the listener through the pooler did not say it hears nothing; log: %s", logs.String())
		}
		if deaf.Connected() {
			t.Fatal("the listener through a transaction pooler calls itself connected")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if deaf.Connected() {
		t.Fatal("the listener through a transaction pooler calls itself connected")
	}

	heard := make(chan string, 16)
	l := st.NewListener(store.ListenerConfig{Channels: []string{store.ChannelJobs}, URL: direct,
		OnNotify: func(ch, payload string) { heard <- payload }})
	l.Start(ctx)
	defer l.Stop()
	for !l.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("the listener on the direct URL did not connect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	p := params("wake")
	p.Queue = "pooled-queue"
	if _, err := st.InsertJob(ctx, nil, p); err != nil {
		t.Fatal(err)
	}
	select {
	case q := <-heard:
		if q != "pooled-queue" {
			t.Fatalf("heard %q", q)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an enqueue through the pooler did not reach the direct listener")
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
