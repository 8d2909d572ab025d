// Package chaos proves Gaffer's guarantees under failure. Its test runs a
// real cluster — node processes (the test binary re-executed), a real
// PostgreSQL it can crash, a 3-member etcd it can break, and a TCP fault
// proxy between every node and PostgreSQL and every etcd member — drives
// load (jobs, a share failing into the DLQ, DLQ replays, "@every 1s" cron
// entries, workflows, drains), injects faults on a seeded schedule that a
// seed replays, then heals everything, lets the cluster settle, and checks
// the invariants from PostgreSQL and the effects the handlers wrote.
//
// Profiles: "ci" (about 3 minutes, run by `go test ./chaos` and so by
// .ci/run) and "long" (30 minutes of faults: CHAOS_PROFILE=long, or
// `make chaos`). CHAOS_SEED replays a schedule.
//
// A mutation run builds the nodes with the lease compare-and-set removed
// (build tag gaffer_mutation_nolease) and requires the suite to find
// violations: the suite is known to be able to fail.
package chaos
