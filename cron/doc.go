// Package cron turns schedules into jobs: cron entries stored in
// PostgreSQL, evaluated by one Scheduler on the cluster's leader. It is the
// only package that imports robfig/cron, which it uses to parse schedules.
//
// # Exactly one job per occurrence
//
// An occurrence is (tenant, entry, scheduled instant). The scheduler fires
// an entry's due occurrences in a transaction fenced by the leader epoch
// (several entries share one, each under a savepoint, so that one
// entry's rollback is its own): it inserts their jobs first — each under the unique occurrence
// key, so a second insert of the same occurrence is a no-op — records
// them in the history, and then advances the entry's cursor with a
// compare-and-set on the old cursor. If the cursor moved (an edit, a
// pause, a concurrent evaluation), the whole transaction rolls back. A
// deposed leader's transaction cannot commit once the new leader raised
// the fence. So an occurrence yields one job: never two (the key, the
// CAS, the fence), never zero (the cursor only moves past an instant in
// the transaction — the savepoint — that recorded it).
//
// # Timing
//
// The scheduler sleeps until the earliest cursor, computed against the
// database clock, and is woken early by NOTIFY gaffer_cron when an entry
// changes. Measured lateness from scheduled instant to job insert is a few
// milliseconds (docs/benchmarks.md).
//
// # Fairness and quotas
//
// Cron is shared by every tenant, so the scheduler reads due entries a
// small batch at a time (turnBatch), round-robin by tenant: a tenant's
// backlog delays another tenant's due entry by one turn at most. Each
// tenant's cron-made jobs draw from a budget on the leader
// (SchedulerConfig.TenantFireRate); a tenant past it is left out of the
// passes until it refills. What a tenant's token may create is bounded
// by a Quota (Client.WithQuota): entries, the shortest interval, the
// total fire rate — checked when an entry is made or rescheduled, never
// when it fires, so entries from before a quota keep working.
//
// # Missed occurrences
//
// An occurrence handled within MisfireGrace (default 1 minute) of its
// instant fires, however late — that covers a leader failover. Beyond it,
// the entry's policy decides: skip (record as missed, fire nothing), once
// (one job stands for all of them), all (fire each, up to a cap, the most
// recent ones). While etcd is unreachable no leader can be proven, so cron
// pauses; when it returns, the policy applies to what was missed.
//
// # Edits
//
// An edit (Update, Put) reads and writes the entry under its row lock.
// A new schedule or zone starts from its first instant after the later
// of now and the last occurrence that made a job: an instant with a job
// is never fired again. An old-schedule occurrence due but not yet
// fired when the edit commits is recorded as missed by the edit (no
// epoch, no job): every instant is in the history once. Put is
// idempotent: a definition that changes nothing writes nothing.
//
// # One-shot entries
//
// "@at <time>" fires once; the firing that handles its instant leaves
// the entry done (no cursor, done_at set), and a done entry is never
// due. A one-shot resumed after its time goes by its missed-fire policy
// at once: skip is done without firing, once and all fire it.
//
// # Status and errors
//
// The firing transaction also writes the entry's status (last fired,
// last occurrence, last job) and ends a run of failures. A firing that
// fails for the entry's own reasons (its schedule or template no longer
// valid, the job insert refused) rolls back; the scheduler then records
// the error on the entry in a second fenced transaction, counts the
// failure and holds the entry back (retry_at, 1s doubling to 5m), and
// goes on with the other entries. Errors of leadership or of the
// database end the pass and are recorded nowhere.
//
// # Time zones and DST
//
// Schedules are evaluated on the wall clock of the entry's time zone (IANA
// names, or fixed offsets; UTC by default). Zones are loaded only from the
// rules compiled into the binary (internal/tzdata), never from $ZONEINFO
// or the OS: nodes of one build agree on every fire time, whatever their
// images hold; nodes report their rules' release, so a mixed cluster
// shows. A local time skipped by a spring-forward transition fires
// once, at the transition instant; a local time repeated by a fall-back
// transition fires once, the first time. robfig/cron's own Next breaks
// both halves of this rule, so the package matches fields on civil time
// and places each match on the timeline itself.
//
// # What this package must never do
//
// Fire outside a fenced transaction when there is a cluster, move a
// cursor without recording what became of the instants it passed, or
// read the node's clock to decide whether an occurrence is due.
package cron
