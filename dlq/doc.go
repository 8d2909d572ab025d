// Package dlq owns the dead-letter queue: jobs that failed for good, kept
// with their full error history so that an operator can look, fix the
// cause, and replay them.
//
// An entry is written by the store in the same statement that moves its
// job to failed (attempts exhausted, a permanent error, or a lost last
// attempt), so a failed job without an entry, or an entry twice, cannot
// happen. Replay inserts one new job and marks the entry replayed in one
// statement; the entry's row lock makes a concurrent second replay wait
// and then refuse.
//
// This package never writes jobs itself and never deletes an unreplayed
// entry except on an operator's purge or past retention.
package dlq
