package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gafferhq/gaffer"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// loadKind is the kind of the jobs a load enqueues.
const loadKind = "bench.load"

// load is the steady load the latency, pressure and soak modes put on a
// node: jobs enqueued at a fixed rate — one at a time while one is due at
// a time, in small batches when the last commit's wait let more fall due —
// each carrying its enqueue instant (taken just before the call), and the
// node's handler filing each job's enqueue → handler start under the
// interval it started in.
type load struct {
	node *gaffer.Node
	reg  *prometheus.Registry
	lat  *intervalLatencies
	rate int
	span time.Duration // how long it enqueues

	mu   sync.Mutex
	sent int
	// outage says the server may be down for a while (pressure restart):
	// an enqueue that fails is counted and tried again, and a sample
	// that cannot read the table's size records none.
	outage       atomic.Bool
	enqueueFails int

	errc    chan error
	stopGen context.CancelFunc
	genDone chan struct{}

	// what sample last read, for the next interval's rates
	lastDone float64
	lastSent int
}

// startLoad starts a node on nodeURL (the pool of its first argument, st,
// enqueues) and, once its first, immediate poll has passed, the enqueuing
// at rate for o.Duration; latencies are filed per interval of every. stop
// ends both.
func startLoad(ctx context.Context, st *store.Store, o Options, nodeURL string, rate int, every time.Duration) (*load, error) {
	l := &load{reg: prometheus.NewRegistry(), lat: &intervalLatencies{every: every}, rate: rate, span: o.Duration,
		errc: make(chan error, 1), genDone: make(chan struct{})}
	node, err := benchNode(ctx, nodeURL, o, l.reg, func(n *gaffer.Node) {
		n.HandleFunc(loadKind, func(ctx context.Context, j *job.Job) error {
			now := time.Now()
			if t0, ok := enqueuedAt(j.Args); ok {
				l.lat.add(now, float32(now.Sub(t0).Microseconds())/1000)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if err := node.Start(ctx); err != nil {
		return nil, err
	}
	l.node = node
	time.Sleep(time.Second)
	l.lat.start = time.Now()
	genCtx, stop := context.WithCancel(ctx)
	l.stopGen = stop
	go l.enqueue(genCtx, job.NewClient(st.Pool(), nil))
	return l, nil
}

func (l *load) enqueue(ctx context.Context, client *job.Client) {
	defer close(l.genDone)
	reqs := make([]job.Request, 5000)
	for i := range reqs {
		reqs[i] = job.Request{Kind: loadKind, Queue: Queue}
	}
	for ctx.Err() == nil {
		elapsed := min(time.Since(l.lat.start), l.span)
		l.mu.Lock()
		due := int(float64(l.rate)*elapsed.Seconds()) - l.sent
		l.mu.Unlock()
		if due <= 0 && elapsed == l.span {
			return
		}
		if due <= 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		n := min(due, len(reqs))
		args := json.RawMessage(`{"t":` + strconv.FormatInt(time.Now().UnixNano(), 10) + `}`)
		for i := range n {
			reqs[i].Args = args
		}
		var err error
		if n == 1 {
			_, err = client.Enqueue(ctx, reqs[0])
		} else {
			_, err = client.EnqueueMany(ctx, reqs[:n])
		}
		if err != nil && l.outage.Load() && ctx.Err() == nil {
			l.mu.Lock()
			l.enqueueFails++
			l.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				l.errc <- fmt.Errorf("enqueue: %w", err)
			}
			return
		}
		l.mu.Lock()
		l.sent += n
		l.mu.Unlock()
	}
}

// wait waits d, or returns the enqueuing's error or ctx's.
func (l *load) wait(ctx context.Context, d <-chan time.Time) error {
	select {
	case <-d:
		return nil
	case err := <-l.errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sample closes interval i, which has just ended: the completions and
// enqueues in it, the enqueue → start of the jobs that started in it
// (also returned, for figures over several intervals), and gaffer.jobs'
// size at its end.
func (l *load) sample(ctx context.Context, st *store.Store, i int) (soakSample, []float64, error) {
	done, err := completedCount(l.reg)
	if err != nil {
		return soakSample{}, nil, err
	}
	l.mu.Lock()
	sent := l.sent
	l.mu.Unlock()
	size, err := tableSize(ctx, st)
	if err != nil && !l.outage.Load() {
		return soakSample{}, nil, err
	}
	ms := l.lat.take(i)
	p := percentiles(ms)
	every := l.lat.every
	s := soakSample{
		Minute:         float64(i+1) * every.Minutes(),
		JobsPerSec:     (done - l.lastDone) / every.Seconds(),
		EnqueuedPerSec: float64(sent-l.lastSent) / every.Seconds(),
		P50:            p.P50, P99: p.P99, Max: p.Max,
		TableMB: float64(size.TableBytes) / (1 << 20), IndexMB: float64(size.IndexBytes) / (1 << 20),
		LiveRows: size.LiveRows, DeadRows: size.DeadRows, Vacuums: size.Vacuums,
	}
	l.lastDone, l.lastSent = done, sent
	return s, ms, nil
}

// finish ends the enqueuing and gives the jobs sent a second to start,
// and up to ten more while any has not (under pressure a start can take
// seconds: that is the figure). It returns how many were sent, the
// latencies not yet taken by sample, and how many had not started by
// then (a node that fell behind the load).
func (l *load) finish() (sent int, rest []float64, unstarted int) {
	l.stopGen()
	<-l.genDone
	sent = l.sent
	time.Sleep(time.Second)
	for wait := time.Now().Add(10 * time.Second); l.lat.count() < sent && time.Now().Before(wait); {
		time.Sleep(50 * time.Millisecond)
	}
	return sent, l.lat.rest(), max(sent-l.lat.count(), 0)
}

// unstartedError is finish's count of jobs not started, as an error.
func unstartedError(sent, unstarted int) error {
	if unstarted == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d jobs did not start within 11 seconds of the end", unstarted, sent)
}

// failures is how many enqueues failed and were tried again.
func (l *load) failures() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.enqueueFails
}

// tableSize reads gaffer.jobs' size, past the dead connections a restart
// or a termination left in st's pool (each fails once, and is dropped).
func tableSize(ctx context.Context, st *store.Store) (store.JobTableSize, error) {
	for tries := 0; ; tries++ {
		z, err := st.JobTableSize(ctx)
		if err == nil || !store.ConnectionLost(err) || tries == 16 {
			return z, err
		}
	}
}

// stop ends the enqueuing, if finish has not, and stops the node.
func (l *load) stop() {
	l.stopGen()
	<-l.genDone
	l.node.Stop(context.Background())
}

// intervalLatencies collects enqueue → start latencies into one bucket
// per interval of every since start, by start time.
type intervalLatencies struct {
	mu      sync.Mutex
	start   time.Time
	every   time.Duration
	buckets [][]float32
	n       int
}

func (l *intervalLatencies) add(now time.Time, ms float32) {
	i := int(now.Sub(l.start) / l.every)
	l.mu.Lock()
	for len(l.buckets) <= i {
		l.buckets = append(l.buckets, nil)
	}
	l.buckets[i] = append(l.buckets[i], ms)
	l.n++
	l.mu.Unlock()
}

// count is how many were added.
func (l *intervalLatencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// take returns bucket i and frees it.
func (l *intervalLatencies) take(i int) []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.buckets) {
		return nil
	}
	out := make([]float64, len(l.buckets[i]))
	for k, v := range l.buckets[i] {
		out[k] = float64(v)
	}
	l.buckets[i] = nil
	return out
}

// rest returns every bucket not yet taken, in one.
func (l *intervalLatencies) rest() []float64 {
	l.mu.Lock()
	n := len(l.buckets)
	l.mu.Unlock()
	var out []float64
	for i := range n {
		out = append(out, l.take(i)...)
	}
	return out
}

// enqueuedAt reads the enqueue instant (Unix nanoseconds) a load's job
// carries as {"t": n}.
func enqueuedAt(args []byte) (time.Time, bool) {
	i := 0
	for i < len(args) && (args[i] < '0' || args[i] > '9') {
		i++
	}
	j := i
	for j < len(args) && args[j] >= '0' && args[j] <= '9' {
		j++
	}
	ns, err := strconv.ParseInt(string(args[i:j]), 10, 64)
	return time.Unix(0, ns), err == nil
}
