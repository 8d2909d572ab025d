package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer/internal/maintenance"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env is a test's own database, with a job client and the job metrics
// the services count in.
type env struct {
	t       *testing.T
	st      *store.Store
	client  *job.Client
	metrics *job.Metrics
	promReg *prometheus.Registry
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st := pgtest.NewStore(t)
	promReg := prometheus.NewRegistry()
	m := job.NewMetrics(promReg)
	return &env{t: t, st: st, client: job.NewClient(st.Pool(), m), metrics: m, promReg: promReg}
}

func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: testWriter{t}})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func (e *env) enqueue(r job.Request) *job.Job {
	e.t.Helper()
	res, err := e.client.Enqueue(context.Background(), r)
	if err != nil {
		e.t.Fatalf("enqueue %+v: %v", r, err)
	}
	return res.Job
}

// claimAs claims the job directly, as a node that then goes silent.
func (e *env) claimAs(node string, ttl time.Duration) store.Job {
	e.t.Helper()
	rows, err := e.st.ClaimJobs(context.Background(), store.ClaimParams{Queue: "default", Limit: 1, Token: 42, LeaseTTL: ttl, Node: node})
	if err != nil || len(rows) != 1 {
		e.t.Fatalf("claim: %v, %d rows", err, len(rows))
	}
	return rows[0]
}

func newRescuer(e *env) *maintenance.LeaseRescuer {
	r, err := maintenance.NewLeaseRescuer(maintenance.LeaseRescuerConfig{Pool: e.st.Pool(), Metrics: e.metrics, Logger: testLogger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// counter sums the values of the series of metric name that carry the
// label pairs given.
func (e *env) counter(name string, labels ...string) float64 {
	e.t.Helper()
	families, err := e.promReg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			if m.GetCounter() != nil {
				total += m.GetCounter().GetValue()
			} else if m.GetGauge() != nil {
				total += m.GetGauge().GetValue()
			}
		}
	}
	return total
}

// exec runs test-only SQL (moving the database's view of time for a row).
func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.st.Pool().Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}
