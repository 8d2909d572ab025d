package bench

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer/internal/pgserver"
	"github.com/gafferhq/gaffer/store"
)

// cpuMeter measures the cores used by this process and by local
// PostgreSQL processes between start and stop.
type cpuMeter struct {
	start    time.Time
	self, pg time.Duration
}

func startCPU() *cpuMeter { return &cpuMeter{start: time.Now(), self: selfCPU(), pg: postgresCPU()} }

func (c *cpuMeter) stop(r *Result) {
	wall := time.Since(c.start).Seconds()
	r.ClientCores = (selfCPU() - c.self).Seconds() / wall
	r.PostgresCores = (postgresCPU() - c.pg).Seconds() / wall
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// postmaster is the pid of the measured PostgreSQL's postmaster when it
// runs on this machine (Run finds it), else 0.
var postmaster int

// findPostmaster is the postmaster of st's server if it runs here: the
// parent of the backend serving this connection. 0 if not.
func findPostmaster(ctx context.Context, st *store.Store) int {
	var backend int
	if err := st.Pool().QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0
	}
	pm, err := pgserver.PostmasterOf(backend)
	if err != nil {
		return 0 // not a process of this machine
	}
	if _, err := pgserver.CPU(pm); err != nil {
		return 0
	}
	return pm
}

// postgresCPU is the CPU the measured PostgreSQL has used: its
// postmaster's accounting (exited backends included, other servers
// left out) when it runs here, else the sum over every live process
// named postgres.
func postgresCPU() time.Duration {
	if postmaster != 0 {
		if d, err := pgserver.CPU(postmaster); err == nil {
			return d
		}
	}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, closeIdx := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closeIdx < 0 || s[open+1:closeIdx] != "postgres" {
			continue
		}
		f := strings.Fields(s[closeIdx+2:])
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			k, _ := strconv.ParseInt(f[12], 10, 64)
			ticks += u + k
		}
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

func percentiles(ms []float64) *latencies {
	if len(ms) == 0 {
		return &latencies{}
	}
	sort.Float64s(ms)
	at := func(p float64) float64 { return ms[min(len(ms)-1, int(p*float64(len(ms))))] }
	return &latencies{P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: ms[len(ms)-1], N: len(ms)}
}

func waitCompleted(ctx context.Context, reg *prometheus.Registry, n float64) error {
	for {
		done, err := completedCount(reg)
		if err != nil {
			return err
		}
		if done >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func completedCount(reg *prometheus.Registry) (float64, error) {
	families, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != "gaffer_job_completed_total" {
			continue
		}
		for _, mf := range f.GetMetric() {
			total += mf.GetCounter().GetValue()
		}
	}
	return total, nil
}
