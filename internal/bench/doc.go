// Package bench measures Gaffer against a PostgreSQL server: throughput,
// latency, fairness, limits, remote workers, the dashboard, an idle
// cluster's load and a soak, each a mode (Modes) that gaffer bench runs.
// It owns the queue Queue while it runs and must never be pointed at a
// queue that production jobs use.
//
// gaffer bench (cmd/gaffer/bench.go) reads the flags, starts a throwaway
// PostgreSQL when none is given, and calls Run; the modes live here, one
// file each (modes.go the plain ones, fair.go, remote.go, soak.go, ui.go,
// pressure.go, cost.go, …); load.go is the steady load, with its enqueue →
// start, that latency, soak and the pressures share.
package bench
