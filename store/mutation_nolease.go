//go:build gaffer_mutation_nolease

package store

import "strings"

// A deliberately broken build for the chaos suite's mutation test: the
// completion, failure and heartbeat statements lose their lease
// compare-and-set, so a stale attempt keeps its lease and its outcome is
// accepted. Never build a release with this tag.
func init() {
	sqlCompleteJobs = strings.Replace(sqlCompleteJobs,
		"WHERE j.id = c.id AND j.attempt = c.attempt AND j.lease_token = c.token\n  AND j.lease_expires_at IS NOT NULL",
		"WHERE j.id = c.id", 1)
	sqlHeartbeatJobs = strings.Replace(sqlHeartbeatJobs,
		"WHERE j.id = h.id AND j.attempt = h.attempt AND j.lease_token = h.token\n  AND j.lease_expires_at IS NOT NULL",
		"WHERE j.id = h.id", 1)
	sqlFailJob = strings.Replace(sqlFailJob,
		"WHERE id = $1 AND attempt = $2 AND lease_token = $3 AND state = 'running'",
		"WHERE id = $1", 1)
	if strings.Contains(sqlCompleteJobs, "j.lease_token = c.token") || strings.Contains(sqlFailJob, "lease_token = $3") ||
		strings.Contains(sqlHeartbeatJobs, "j.lease_token = h.token") {
		panic("mutation_nolease: the completion statement changed; update the mutation")
	}
}
