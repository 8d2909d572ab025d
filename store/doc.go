// Package store is Gaffer's only door to PostgreSQL. Every SQL statement
// lives here, and pgx.ErrNoRows becomes ErrNotFound at this boundary.
//
// # What lives where
//
//   - schema/ is the schema's one current text, and the only SQL anyone
//     edits for tables and routines: tables.sql (every table as it is at
//     the latest migration — columns in the migrated database's order,
//     constraints, indexes, seed rows) and one file per group of routines
//     (claim.sql, limits.sql, workflow.sql, jobs.sql, remote.sql), each
//     function with the comment that documents it and each trigger beside
//     its function. LoadSchema runs it into an empty database; nothing
//     runs it in production.
//   - migrations/NNNN_name.{up,down}.sql take a database from one version
//     to the next and back (Migrator, below). They are history: an
//     applied up file is never edited (its checksum is recorded); a down
//     file may be fixed.
//   - queries/*.sql hold the statements the Go code runs, by name.
//   - internal/catalog snapshots schema gaffer from PostgreSQL's catalog
//     and tells two snapshots apart; internal/migrategen writes routine
//     migrations from schema/.
//
// Two tests hold schema/ and migrations/ together.
// TestSchemaMatchesMigrations builds one database from the migrations and
// one from schema/ and requires the same catalog: tables, columns in
// order, constraints, indexes, sequences, routines byte for byte,
// triggers and seed rows. TestMigrateDownRestoresTheCatalog applies the
// migrations one at a time and reverts them one at a time, and requires
// each revert to give back the catalog from before its up file.
//
// # Changing the schema
//
//  1. Edit schema/: the table or the routine, as it should be.
//
//  2. A table, column, constraint, index or seed row changed: write that
//     migration by hand, the next NNNN_name.up.sql and its .down.sql
//     (docs/operations.md, "Writing a migration": expand, then contract;
//     indexes concurrently).
//
//  3. Routines (functions, triggers) changed: generate their migration,
//     from the repository's root:
//
//     go run ./store/internal/migrategen -name <snake_name> [-expand]
//
//     It writes the next migration from the migrations' routines to
//     schema/'s (with "-- gaffer:generated"), and refuses while tables
//     differ (step 2 first). Changed schema/ again before a release? Run
//     it with -replace to write the latest generated migration anew.
//
//  4. go test ./store/... (the catalog tests above, and the rest).
//
// # What it owns
//
// The gaffer schema — the tables schema/tables.sql lists, and
// schema_migrations. Each row carries a tenant; every lookup can be
// scoped to one.
//
// # Migrations
//
// Migrator applies them oldest first, each committed on its own: in its
// own transaction with its schema_migrations row, or, for a file whose
// header says "-- gaffer:no-transaction", statement by statement (what
// CREATE INDEX CONCURRENTLY needs), recorded after the last. The header
// also says whether older binaries keep working on the schema once the
// migration is applied ("-- gaffer:expand", "-- gaffer:compatible-from
// N"; otherwise it is a contract); the row records it, and CheckSchema
// refuses a schema ahead of the binary by a contract it does not carry. One session
// advisory lock, on the one connection a run uses throughout, serialises
// runs. Before any step, every applied row's checksum (SHA-256 of the up
// file) is compared with the migration's: an edited one is refused, a
// row without one (applied before checksums) gets it. An INVALID index
// of the name a CREATE INDEX CONCURRENTLY builds — a failed earlier run's
// — is dropped before the build, so a re-run is never wedged by it.
//
// A migration run needs one server session throughout (the advisory
// lock): it runs on a direct connection, never through a transaction-mode
// pooler.
//
// # Connections
//
// OpenWith reads a URL with Gaffer's defaults (PoolConfig): several hosts
// mean read-write (the primary, wherever a failover put it) with a
// connect timeout per host; jit is turned off per connection, except
// through a transaction-mode pooler (ConnectOptions.TransactionPooler),
// where nothing may outlive a transaction on a server connection, so no
// statement is prepared either (pgx's cache_describe mode). The Listener
// holds the one session-scoped thing at run time, LISTEN, on a connection
// of its own (ListenerConfig.URL), and proves with a probe notification
// sent through the pool that it hears what the pool says.
//
// # The claim
//
// Every claim path — a node's claim of a queue, its side claim of a few
// units, a remote worker's claim — is one statement (queries/jobs.sql's
// claim_jobs, through Claim) around one routine, gaffer.claim in
// schema/claim.sql: its glossary names every variable prefix. Claim
// returns the jobs and where the caller's next claim starts among the
// queue's units; ClaimCursor keeps that, and each unit's cursor, for a
// claimer (a node's producer, or a remote worker on the node its claims
// come to). Limits are weighed by gaffer.limit_admit (schema/limits.sql),
// under the limits lock that keeps gaffer.limits as a claim read it until
// it commits. store/TestClaimModel checks every path against a plain Go
// model of what the claim promises.
//
// # The hot path
//
// A job is touched three times: inserted (COPY for batches), claimed
// (one statement per batch: gaffer.claim picks and locks with FOR UPDATE
// SKIP LOCKED, claim_jobs starts them) and finished (one UPDATE … FROM
// unnest(…) per batch of completions). Each write for a running attempt
// is compare-and-set on (id, attempt, lease_token, running).
//
// Two measured hazards shape the statements:
//
//   - Every claim leaves dead entries at the front of the claim index
//     (jobs_due_idx) until vacuum removes them, and the next claim walks
//     over them: with 500,000 dead entries one claim of 1,000 took 130 ms.
//     Claims therefore continue each unit from where the previous full
//     claim ended (ClaimCursor: a row comparison the index uses as its
//     start): 0.7 ms for the same claim. The claimer drops its cursors
//     after a short claim and at least every second, so nothing queued
//     before a cursor waits longer than that.
//   - Batch writes for running attempts join an unnest of the batch on
//     the primary key. Written with "state = 'running'", the planner may,
//     from statistics taken while few jobs ran, drive the update from
//     jobs_running_idx instead and rescan the unnest per row: 800 ms per
//     batch of 1,000. They test "lease_expires_at IS NOT NULL" instead,
//     which jobs_lease_state_check makes equivalent and which no partial
//     index matches.
//
// # Keeping the jobs table small and unbloated
//
//   - Indexes are few and partial. jobs_due_idx holds only claimable
//     rows (pending, retrying, due) in claim order, and jobs_scheduled_idx
//     those waiting for their run_at, by time (a claim makes them due when
//     it comes: gaffer.claim_promote); jobs_running_idx only
//     running rows, keyed on the node (for dead-node rescue);
//     jobs_unique_idx only unfinished rows with a unique key;
//     jobs_finalized_idx only finished rows, for retention. A finished job
//     therefore sits in the primary key and the retention index only.
//   - Heartbeats change only lease_expires_at, which no index covers, so
//     they are HOT updates (no index writes; TestHeartbeatIsHOT checks it).
//   - fillfactor 85 leaves room on each page for the claim and completion
//     updates to put the new row version beside the old one.
//   - Autovacuum triggers on a fixed count of dead rows (20,000) rather
//     than a fraction of the table, with no cost delay: dead entries at the
//     front of the claim index slow every claim until vacuum removes them,
//     and a fraction-based trigger would let a large table accumulate
//     millions.
//   - Finished jobs are deleted after JobRetention (default 24h) and DLQ
//     entries after DLQRetention (default 14 days), oldest first, in
//     batches of 5,000 under SKIP LOCKED; so are finished workflow runs,
//     idempotency keys, cron history and the rows of dead nodes and
//     revoked tokens, each after its own retention (maintenance.RetentionCleaner).
//
// # What it must never do
//
// Decide policy (backoff, which kinds run where) or log: it returns errors
// and leaves both to its callers.
package store
