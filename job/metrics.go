package job

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer/store"
)

// Metrics are the job subsystem's Prometheus collectors. Build one per
// process with NewMetrics and share it between the client and the worker.
type Metrics struct {
	enqueued    *prometheus.CounterVec
	completed   *prometheus.CounterVec
	retried     *prometheus.CounterVec
	failed      *prometheus.CounterVec
	cancelled   *prometheus.CounterVec
	snoozed     *prometheus.CounterVec
	rescued     *prometheus.CounterVec
	stale       *prometheus.CounterVec
	queueWait   *prometheus.HistogramVec
	runDuration *prometheus.HistogramVec
	depth       *prometheus.GaugeVec
	oldestDue   *prometheus.GaugeVec
	limitUsed   *prometheus.GaugeVec
	limitDue    *prometheus.GaugeVec
	horizonHeld prometheus.Gauge

	// The per-job series, looked up once per (queue, kind) label pair: a
	// vector's label lookup costs more than the observation itself.
	mu    sync.RWMutex
	kinds map[kindKey]*kindMetrics

	// known are the kinds and queues that may be label values; see
	// SetKnown. Until it is first called every value is allowed.
	known atomic.Pointer[knownLabels]
}

// OtherLabel is the label value for a kind or queue no node handles:
// kinds and queue names are chosen by tenants, and each distinct label
// value is a series Prometheus keeps, so only values the operator
// configured become labels.
const OtherLabel = "other"

// RemoteLabelBound is how many of the kinds and queues tenants' remote
// workers registered may be label values beside the nodes' and those of
// remote workers registered with a token spanning tenants (the
// operator's, all of them; store.KnownLabels): a tenant names them, so
// few — each tenant's first 3 kinds and 2 queues by name, 8 kinds and 4
// queues in all, round-robin over tenants — and they stay within the
// series budget TestMetricLabelsAreBounded holds.
var RemoteLabelBound = store.RemoteLabels{KindsPerTenant: 3, QueuesPerTenant: 2, Kinds: 8, Queues: 4}

type knownLabels struct{ kinds, queues map[string]bool }

// SetKnown sets the kinds and queues that may appear as label values:
// those some node handles or works. Every other value is counted under
// OtherLabel. Safe to call at any time, from any goroutine.
func (m *Metrics) SetKnown(kinds, queues []string) {
	k := &knownLabels{kinds: make(map[string]bool, len(kinds)), queues: make(map[string]bool, len(queues))}
	for _, x := range kinds {
		k.kinds[x] = true
	}
	for _, x := range queues {
		k.queues[x] = true
	}
	m.known.Store(k)
}

// labels maps a job's queue and kind to the label values to use.
func (m *Metrics) labels(queue, kind string) (string, string) {
	k := m.known.Load()
	if k == nil {
		return queue, kind
	}
	if !k.queues[queue] {
		queue = OtherLabel
	}
	if !k.kinds[kind] {
		kind = OtherLabel
	}
	return queue, kind
}

// queueLabel maps a queue name to its label value.
func (m *Metrics) queueLabel(queue string) string {
	q, _ := m.labels(queue, "")
	return q
}

// counter returns v's series for a job's queue and kind (and any further
// label values), bounded as labels says.
func (m *Metrics) counter(v *prometheus.CounterVec, queue, kind string, more ...string) prometheus.Counter {
	q, k := m.labels(queue, kind)
	return v.WithLabelValues(append([]string{q, k}, more...)...)
}

// ObserveQueueWait records how long a claimed job of queue and kind
// waited from due to claimed (queue_wait_seconds, by queue).
func (m *Metrics) ObserveQueueWait(queue, kind string, wait time.Duration) {
	m.forKind(queue, kind).queueWait.Observe(wait.Seconds())
}

// CountOutcome counts an attempt's outcome once it is written, by the
// values of AttrOutcome: OutcomeCompleted, OutcomeRetry, OutcomeFailed,
// OutcomeCancelled and OutcomeSnoozed each have a counter; the others
// (lost, released) count nothing here.
func (m *Metrics) CountOutcome(queue, kind, outcome string) {
	switch outcome {
	case OutcomeCompleted:
		m.forKind(queue, kind).completed.Inc()
	case OutcomeRetry:
		m.counter(m.retried, queue, kind).Inc()
	case OutcomeFailed:
		m.counter(m.failed, queue, kind).Inc()
	case OutcomeCancelled:
		m.counter(m.cancelled, queue, kind).Inc()
	case OutcomeSnoozed:
		m.counter(m.snoozed, queue, kind).Inc()
	}
}

// CountStale counts a write refused because the attempt that made it no
// longer owned its job; op names the write ("complete", "heartbeat", …).
func (m *Metrics) CountStale(queue, kind, op string) {
	m.counter(m.stale, queue, kind, op).Inc()
}

// CountRescued counts an attempt the lease rescuer ended as lost, by the
// job's new state (retrying, failed or cancelled); one that failed the
// job for good counts as a failed job too.
func (m *Metrics) CountRescued(queue, kind, newState string) {
	m.counter(m.rescued, queue, kind, newState).Inc()
	if newState == string(Failed) {
		m.counter(m.failed, queue, kind).Inc()
	}
}

// maxLimitLabels bounds the limits the limit gauges name.
const maxLimitLabels = 100

// SetQueueGauges replaces the cluster-wide gauges — unfinished jobs per
// queue and state, each queue's oldest due age, each limit's busiest key
// and due jobs — with what queues and limits say (as the queue monitor
// reads them). Queues no node works are summed under OtherLabel; limits
// beyond the first 100 (by name) are left out.
func (m *Metrics) SetQueueGauges(queues []store.Queue, limits []store.LimitUsage) {
	// Queues no node works are summed under OtherLabel (their oldest job
	// is the oldest of them): tenants name queues, and each name would be
	// a series.
	type gauges struct {
		pending, retrying, running int64
		oldest                     time.Duration
	}
	byLabel := map[string]*gauges{}
	for _, x := range queues {
		l := m.queueLabel(x.Name)
		g := byLabel[l]
		if g == nil {
			g = &gauges{}
			byLabel[l] = g
		}
		g.pending += x.Pending
		g.retrying += x.Retrying
		g.running += x.Running
		g.oldest = max(g.oldest, x.OldestDueAge)
	}
	// Limits are the operator's, named by the operator: a bounded set of
	// label values (the first maxLimitLabels by name).
	m.limitUsed.Reset()
	m.limitDue.Reset()
	for i, l := range limits {
		if i == maxLimitLabels {
			break
		}
		m.limitUsed.WithLabelValues(l.Name).Set(float64(l.Busiest))
		m.limitDue.WithLabelValues(l.Name).Set(float64(l.Due))
	}
	m.depth.Reset()
	m.oldestDue.Reset()
	for l, g := range byLabel {
		m.depth.WithLabelValues(l, string(Pending)).Set(float64(g.pending))
		m.depth.WithLabelValues(l, string(Retrying)).Set(float64(g.retrying))
		m.depth.WithLabelValues(l, string(Running)).Set(float64(g.running))
		m.oldestDue.WithLabelValues(l).Set(g.oldest.Seconds())
	}
}

type kindKey struct{ queue, kind string }

type kindMetrics struct {
	enqueued    prometheus.Counter
	completed   prometheus.Counter
	runDuration prometheus.Observer
	queueWait   prometheus.Observer
}

func (m *Metrics) forKind(queue, kind string) *kindMetrics {
	queue, kind = m.labels(queue, kind)
	k := kindKey{queue, kind}
	m.mu.RLock()
	km := m.kinds[k]
	m.mu.RUnlock()
	if km != nil {
		return km
	}
	km = &kindMetrics{
		enqueued:    m.enqueued.WithLabelValues(queue, kind),
		completed:   m.completed.WithLabelValues(queue, kind),
		runDuration: m.runDuration.WithLabelValues(queue, kind),
		queueWait:   m.queueWait.WithLabelValues(queue),
	}
	m.mu.Lock()
	m.kinds[k] = km
	m.mu.Unlock()
	return km
}

// SetHorizonHeld sets how long a transaction has held back vacuum
// (maintenance.HorizonWatch).
func (m *Metrics) SetHorizonHeld(d time.Duration) { m.horizonHeld.Set(d.Seconds()) }

// NewMetrics builds the collectors and registers them on reg. A nil reg
// leaves them unregistered (still counting, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "gaffer", Subsystem: "job", Name: name, Help: help}, labels)
	}
	buckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800}
	m := &Metrics{
		kinds:     map[kindKey]*kindMetrics{},
		enqueued:  counter("enqueued_total", "Jobs inserted (a caller's transaction may still roll back).", "queue", "kind"),
		completed: counter("completed_total", "Attempts that completed and were accepted.", "queue", "kind"),
		retried:   counter("retried_total", "Attempts that failed and will be retried.", "queue", "kind"),
		failed:    counter("failed_total", "Jobs that failed for good into the DLQ.", "queue", "kind"),
		cancelled: counter("cancelled_total", "Running jobs ended cancelled.", "queue", "kind"),
		snoozed:   counter("snoozed_total", "Attempts that snoozed.", "queue", "kind"),
		rescued:   counter("rescued_total", "Running attempts ended as lost (lease expired or node dead), by the job's new state.", "queue", "kind", "state"),
		stale:     counter("stale_rejected_total", "Writes from an attempt that no longer owned its job, refused and discarded.", "queue", "kind", "op"),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "gaffer", Subsystem: "job", Name: "queue_wait_seconds",
			Help: "Time from a job being due to being claimed.", Buckets: buckets}, []string{"queue"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "gaffer", Subsystem: "job", Name: "run_duration_seconds",
			Help: "Handler run time per attempt.", Buckets: buckets}, []string{"queue", "kind"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "gaffer", Subsystem: "queue", Name: "jobs",
			Help: "Unfinished jobs per queue and state (cluster-wide)."}, []string{"queue", "state"}),
		oldestDue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "gaffer", Subsystem: "queue", Name: "oldest_due_age_seconds",
			Help: "How long the oldest due, unclaimed job of each queue has waited: the falling-behind gauge."}, []string{"queue"}),
		horizonHeld: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "gaffer", Subsystem: "db", Name: "horizon_held_seconds",
			Help: "How long the oldest transaction, snapshot, replication slot or prepared transaction that keeps vacuum from removing gaffer.jobs' dead rows has held them (0: none); each node reads it every 5s."}),
		limitUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "gaffer", Subsystem: "limit", Name: "busiest_key_running",
			Help: "Running attempts under each limit's busiest key (compare with its concurrency)."}, []string{"limit"}),
		limitDue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "gaffer", Subsystem: "limit", Name: "due_jobs",
			Help: "Due, unclaimed jobs each limit matches (up to 10,000): waiting for a slot, a token or a worker."}, []string{"limit"}),
	}
	if reg != nil {
		reg.MustRegister(m.enqueued, m.completed, m.retried, m.failed, m.cancelled, m.snoozed, m.rescued, m.stale,
			m.queueWait, m.runDuration, m.depth, m.oldestDue, m.limitUsed, m.limitDue, m.horizonHeld)
	}
	return m
}
