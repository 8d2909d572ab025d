#!/bin/sh
# Measures another tenant's cron lateness beside a tenant with many
# per-second entries: a real node process leads (embedded etcd, a
# throwaway PostgreSQL, loopback only), cron unmetered, tenant "hog" has
# ENTRIES entries firing every second, tenant "victim" one; it prints,
# per second of the victim, its lateness and how many of the hog's
# firings went ahead of it, then p50/p99/max (docs/benchmarks.md).
# Usage: scripts/bench-cron-fairness.sh [ENTRIES [SECONDS]]   (500, 12)
# To compare with an older build, copy cron_fairness_process_test.go
# into that checkout and run this script there.
set -eu
cd "$(dirname "$0")/.."
GAFFER_BENCH_CRON_ENTRIES=${1:-500} GAFFER_BENCH_CRON_SECONDS=${2:-12} \
	go test . -run '^TestCronOneTenantsEntriesDoNotDelayAnothers$' -count=1 -v |
	grep -E 'victim|hog:|want|^(--- |ok|FAIL)' || true
