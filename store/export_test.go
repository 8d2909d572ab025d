package store

import "time"

// ListJobsSQL is listJobsSQL, for the plan tests.
var ListJobsSQL = listJobsSQL

// SetListenProbeTimeout shortens the listener's probe for a test; the
// returned func restores it.
func SetListenProbeTimeout(d time.Duration) func() {
	old := listenProbeTimeout
	listenProbeTimeout = d
	return func() { listenProbeTimeout = old }
}

// SetClaimInputBudget changes MaxClaimInputBytes for a test; the returned
// func restores it. Not for parallel tests.
func SetClaimInputBudget(n int64) func() {
	old := claimInputBudget
	claimInputBudget = n
	return func() { claimInputBudget = old }
}

// CountBulkSQL and CountByStateSQL are countBulkSQL and countByStateSQL,
// for the plan tests.
var (
	CountBulkSQL    = countBulkSQL
	CountByStateSQL = countByStateSQL
)
