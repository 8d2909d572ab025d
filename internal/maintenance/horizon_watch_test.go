package maintenance_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/clock"
	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// A REPEATABLE READ session that holds its snapshot: the watch reports
// how long it has held (from its transaction's start, then from when the
// watch first saw it), warns once past WarnAfter naming it, and says when
// it lets go. A claim's own short transactions are never reported.
//
// Not parallel, as the other horizon tests: a session here takes its
// snapshot's xmin from the oldest transaction running anywhere, so
// another test's long transaction would show through it.
func TestHorizonWatchNamesALongTransaction(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var logs safeBuffer
	w, err := maintenance.NewHorizonWatch(maintenance.HorizonWatchConfig{Pool: e.st.Pool(), Metrics: e.metrics,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs}), WarnAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	w.SetClock(clk)
	gauge := func() float64 { return e.counter("gaffer_db_horizon_held_seconds") }
	run := func() {
		t.Helper()
		if err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Nothing held: the pool's own sessions are idle.
	run()
	if g := gauge(); g != 0 {
		t.Fatalf("gauge %v with nothing holding the horizon", g)
	}

	cfg := e.st.Pool().Config().ConnConfig.Copy()
	// PostgreSQL itself replaces what is not printable ASCII with "?".
	cfg.RuntimeParams["application_name"] = "nightly\nreport"
	holder, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, `BEGIN ISOLATION LEVEL REPEATABLE READ`); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT count(*) FROM gaffer.jobs`); err != nil {
		t.Fatal(err)
	}
	var pid int
	holder.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid)
	// Other sessions' transactions come and go meanwhile.
	e.enqueue(job.Request{Kind: "k", Queue: "q"})

	// Its transaction's age, by the database's clock, while the watch's
	// own clock stands still.
	time.Sleep(1200 * time.Millisecond)
	run()
	if g := gauge(); g < 1.2 || g > 30 {
		t.Fatalf("gauge %v s, want the holder's transaction age (about 1.2 s)", g)
	}
	if strings.Contains(logs.String(), "keeps vacuum") {
		t.Fatalf("warned before WarnAfter:\n%s", logs.String())
	}

	// Held past WarnAfter by the watch's clock: one warning, naming it.
	clk.Advance(61 * time.Second)
	e.enqueue(job.Request{Kind: "k", Queue: "q"})
	run()
	if g := gauge(); g < 61 {
		t.Fatalf("gauge %v s after 61 s held", g)
	}
	clk.Advance(10 * time.Second)
	run()
	out := logs.String()
	if n := strings.Count(out, "keeps vacuum"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, out)
	}
	for _, want := range []string{"holder=session", "pid=" + strconv.Itoa(pid), "name=nightly?report", `state="idle in transaction"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("the warning does not say %s:\n%s", want, out)
		}
	}

	// Health, for the cluster status and the dashboard: the holder named
	// for an operator, not for a tenant.
	if got := fmt.Sprint(w.Health(true)); !strings.Contains(got, fmt.Sprintf("a session (pid %d)", pid)) ||
		!strings.Contains(got, `name "nightly?report"`) || !strings.Contains(got, "for 1m11s") {
		t.Fatalf("Health(true) = %s", got)
	}
	if got := fmt.Sprint(w.Health(false)); !strings.Contains(got, "a long transaction on the database has kept vacuum") ||
		strings.Contains(got, "nightly") || strings.Contains(got, strconv.Itoa(pid)) {
		t.Fatalf("Health(false) = %s", got)
	}

	// What a role without pg_read_all_stats sees of another role's
	// session (docs/operations.md, Long transactions): its pid, role and
	// name, not its state, address or start.
	role := fmt.Sprintf("watch_%d", pid)
	e.exec(`CREATE ROLE ` + role + ` LOGIN`)
	t.Cleanup(func() { e.st.Pool().Exec(context.Background(), `DROP ROLE IF EXISTS `+role) })
	rcfg := e.st.Pool().Config().Copy()
	rcfg.ConnConfig.User = role
	rpool, err := pgxpool.NewWithConfig(ctx, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := store.New(rpool).HorizonHolder(ctx)
	rpool.Close()
	if err != nil {
		t.Fatal(err)
	}
	if h.Kind != "session" || int(h.PID) != pid || h.Role != "postgres" || h.Name != "nightly?report" ||
		h.State != "" || h.Client != "" || h.Age != 0 {
		t.Fatalf("an unprivileged role read the holder as %+v", h)
	}

	// Let go: the gauge is back to zero, and the log says so once.
	if _, err := holder.Exec(ctx, `COMMIT`); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5 * time.Second)
	run()
	run()
	if g := gauge(); g != 0 {
		t.Fatalf("gauge %v after the holder committed", g)
	}
	if h := w.Health(true); len(h) != 0 {
		t.Fatalf("Health after the release: %v", h)
	}
	if n := strings.Count(logs.String(), "let go"); n != 1 {
		t.Fatalf("%d release lines, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "held_for=1m16s") {
		t.Fatalf("the release line does not say how long it held (1m16s by the watch's clock):\n%s", logs.String())
	}
}

// A watch that is not the one to speak (a node not the leader) logs
// nothing, but its Health still tells: every node's status does.
func TestHorizonWatchSilentOffTheLeader(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var logs safeBuffer
	w, err := maintenance.NewHorizonWatch(maintenance.HorizonWatchConfig{Pool: e.st.Pool(), Metrics: e.metrics,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs}), Speak: func() bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	w.SetClock(clk)
	holder, err := e.st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, `SELECT txid_current()`); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute)
	}
	if logs.String() != "" {
		t.Fatalf("a silent watch logged:\n%s", logs.String())
	}
	if h := w.Health(false); len(h) != 1 {
		t.Fatalf("Health = %v, want the hold", h)
	}
}

// Stop zeroes the gauge: leadership moved, and the next leader's watch
// reports from then on.
func TestHorizonWatchStopZeroesTheGauge(t *testing.T) {
	e := newEnv(t)
	w, err := maintenance.NewHorizonWatch(maintenance.HorizonWatchConfig{Pool: e.st.Pool(), Metrics: e.metrics})
	if err != nil {
		t.Fatal(err)
	}
	e.metrics.SetHorizonHeld(42 * time.Second)
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if g := e.counter("gaffer_db_horizon_held_seconds"); g != 0 {
		t.Fatalf("gauge %v after Stop: a deposed leader would report a stale hold", g)
	}
}

type safeBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
