package gaffer

import (
	"crypto/tls"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Node. Zero values take the defaults shown.
type Config struct {
	// Pool is the PostgreSQL pool to use; the caller keeps ownership.
	// Either Pool or DatabaseURL is required.
	Pool *pgxpool.Pool
	// DatabaseURL opens a pool owned by the node when Pool is nil. It may
	// name several hosts (host=a,b, or postgres://a:5432,b:5432/db):
	// without target_session_attrs the node then connects to whichever
	// accepts writes, and reconnects there after a failover.
	DatabaseURL string
	// ListenDatabaseURL is where the node's LISTEN connection goes.
	// Default: the pool's own settings. Set it when DatabaseURL goes
	// through a transaction-mode pooler, which cannot carry LISTEN: a
	// direct (or session-pooled) URL to the same database.
	ListenDatabaseURL string
	// TransactionPooler says the node's pool reaches PostgreSQL through a
	// transaction-mode pooler (PgBouncer with pool_mode = transaction).
	// A pool the node opens from DatabaseURL then prepares no statements
	// and sends no jit parameter (a Pool you pass is yours to set up so:
	// pgx.QueryExecModeCacheDescribe); and without ListenDatabaseURL the
	// node runs no LISTEN connection and finds new work by polling only,
	// which it says at start-up. Default false.
	TransactionPooler bool
	// MaxConns caps the pool the node opens from DatabaseURL. Default: the
	// total concurrency of Queues / 10, between 4 and 20. Beside it the
	// node opens a pool of 2 for the heartbeats and releases that keep its
	// leases (job.WorkerConfig.LeasePool), so that they never wait behind
	// claims for a connection.
	MaxConns int32
	// ID names the node in the cluster and on every job it runs. Default:
	// hostname-<random>.
	ID string
	// Queues maps each queue this node works to how many of its jobs it runs
	// at once. Default {"default": 10}.
	Queues map[string]int
	// LeaseTTL: how long a claimed job stays owned without a heartbeat.
	// Default 30s.
	LeaseTTL time.Duration
	// PollInterval: the fallback claim poll. Default 1s.
	PollInterval time.Duration
	// ClaimBatch caps the jobs one claim takes. Default 500.
	ClaimBatch int
	// FetchCooldown is the least time between two claims of one queue:
	// longer batches more jobs into each claim, for less database CPU per
	// job and a little more pickup latency under load (none after a quiet
	// spell). Default 2ms.
	FetchCooldown time.Duration
	// TrickleCooldown is the least time between a claim that found fewer
	// due jobs than it had slots for and the next claim of that queue: at
	// a steady trickle, jobs enqueued meanwhile share a claim (less
	// database CPU per job, a few milliseconds more pickup). Not after a
	// quiet spell, nor after a full claim. Default 8ms; negative: none.
	TrickleCooldown time.Duration
	// RemoteMaxWait bounds how long a remote worker's claim may wait for
	// work. Default 30s.
	RemoteMaxWait time.Duration
	// RemoteMaxWaiting caps the claims of one tenant's remote workers
	// that wait for work on this node at once (one per worker); past it a
	// claim that finds nothing is refused (remote.ErrTooManyWaiting).
	// Default 256.
	RemoteMaxWaiting int
	// RescueInterval: how often expired leases are swept. Default 5s.
	RescueInterval time.Duration
	// QueueMonitorInterval: how often the leader refreshes the queue
	// gauges and records a throughput sample. Default 10s.
	QueueMonitorInterval time.Duration
	// JobRetention and DLQRetention: how long finished jobs and DLQ
	// entries are kept. Defaults 24h and 14 days.
	JobRetention time.Duration
	DLQRetention time.Duration
	// IdempotencyRetention: how long API Idempotency-Keys are kept.
	// Default 24h.
	IdempotencyRetention time.Duration
	// WorkflowRetention: how long a finished workflow run and its steps
	// are kept. A failed run stays while a DLQ entry of one of its steps
	// could still be replayed (which resumes it), and any run while a job
	// of one of its steps is unfinished. Default 7 days.
	WorkflowRetention time.Duration
	// DeadNodeRetention: how long the row of a node that left or was
	// lost is kept. Default 7 days.
	DeadNodeRetention time.Duration
	// CronHistoryRetention: how long cron occurrence records are kept.
	// Default 7 days.
	CronHistoryRetention time.Duration
	// RevokedTokenRetention: how long a revoked API token's record is
	// kept. Default 30 days.
	RevokedTokenRetention time.Duration
	// VacuumThreshold: how many dead row versions gaffer.jobs gathers
	// (beyond those the last vacuum had to leave) before the leader
	// vacuums it itself, rather than waiting for autovacuum, which looks
	// at a database only once per autovacuum_naptime (a minute by
	// default). Needs the node's role to own the table; a role that does
	// not leaves it to autovacuum, and says so at start-up. Default
	// 20,000; negative: leave it to autovacuum.
	VacuumThreshold int64
	// SkipSchemaCheck starts the node even on a schema it cannot work
	// with (behind it, or ahead by a contract).
	SkipSchemaCheck bool

	// EtcdEndpoints makes the node a cluster member: it registers in etcd,
	// takes part in the leader election, and runs the leader-only services
	// (dead-node rescue, retention, queue gauges, cron) only while it
	// leads. Without it, the node runs those services itself, unfenced.
	// Lease rescue runs on every node either way.
	EtcdEndpoints []string
	// EtcdTLS, when set, is used to reach etcd over TLS (https://
	// endpoints): RootCAs to verify etcd, Certificates to present a
	// client certificate. Default: plain connections, or the system's
	// roots for https:// endpoints.
	EtcdTLS *tls.Config
	// EtcdUsername and EtcdPassword authenticate to an etcd with auth
	// enabled. Default: no authentication.
	EtcdUsername string
	EtcdPassword string
	// ClusterPrefix is the etcd key prefix. Default "/gaffer".
	ClusterPrefix string
	// SessionTTL is the etcd lease behind membership and leadership.
	// Default 10s.
	SessionTTL time.Duration
	// ReportInterval: how often the node reports to the nodes table.
	// Default 2s.
	ReportInterval time.Duration
	// Version is reported to the cluster. Default "dev".
	Version string
	// CronMisfireGrace: how late an occurrence may be handled and still
	// fire regardless of its entry's missed-fire policy. Default 1m.
	CronMisfireGrace time.Duration
	// CronTenantFireRate: how many jobs per second one tenant's cron
	// entries may make, sustained (burst: twice that). A tenant past it
	// waits; other tenants' entries fire on time. Default 200 (the API's
	// default per token); negative: unmetered.
	CronTenantFireRate float64
	Logger             hclog.Logger
	// Registerer receives the node's Prometheus collectors. Default: none.
	Registerer prometheus.Registerer
	// TracerProvider makes a span of every attempt the node runs, linked
	// to the trace context its job was enqueued in (docs/configuration.md,
	// "Tracing"). Default nil: no spans, and attempts pay nothing for
	// tracing. Pass otel.GetTracerProvider() to use the global one; the
	// node never installs a global provider. The trace context is stored
	// with jobs either way.
	TracerProvider trace.TracerProvider
}
