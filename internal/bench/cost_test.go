package bench_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/internal/bench"
	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/store"
)

// bench cost runs both phases at the rate asked and reads PostgreSQL's
// CPU from its own processes (the test's server is local): each phase
// works every job it enqueued, and each cost is a positive figure.
func TestCostMeasuresBothPhases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two 2-second phases")
	}
	ctx := context.Background()
	url := pgtest.NewDatabase(t)
	o := bench.Options{Rate: 50, Duration: 2 * time.Second, Concurrency: 4, ClaimBatch: 100, URL: url,
		Retention: time.Hour, Sample: time.Second,
		Kinds: func(context.Context, *gaffer.Node, string, ...string) error { return nil }}
	s, err := store.Open(ctx, url, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := bench.Run(ctx, s, "cost", o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	var got struct {
		Cost struct {
			Rate   int
			Gaffer struct {
				Jobs       int
				PostgresMS float64 `json:"postgres_cpu_ms_per_1000_jobs"`
				ProcessMS  float64 `json:"process_cpu_ms_per_1000_jobs"`
				Latency    struct {
					N int `json:"samples"`
				}
			}
			Plain struct {
				Jobs       int
				PostgresMS float64 `json:"postgres_cpu_ms_per_1000_jobs"`
				Latency    struct {
					N int `json:"samples"`
				}
			} `json:"plain_skip_locked"`
			Ratio float64 `json:"pg_cpu_ratio"`
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Cost
	// 50 jobs/s for 2 s: about 100 in each phase (the ticker may drop a
	// tick or two on a loaded machine).
	for name, n := range map[string]int{"gaffer": c.Gaffer.Jobs, "plain": c.Plain.Jobs} {
		if n < 80 || n > 101 {
			t.Errorf("%s phase worked %d jobs, want about 100", name, n)
		}
	}
	if c.Gaffer.Latency.N != c.Gaffer.Jobs || c.Plain.Latency.N != c.Plain.Jobs {
		t.Errorf("latency samples %d and %d for %d and %d jobs", c.Gaffer.Latency.N, c.Plain.Latency.N, c.Gaffer.Jobs, c.Plain.Jobs)
	}
	if c.Gaffer.PostgresMS <= 0 || c.Plain.PostgresMS <= 0 || c.Gaffer.ProcessMS <= 0 || c.Ratio <= 0 {
		t.Errorf("costs not measured: %s", b)
	}
}
