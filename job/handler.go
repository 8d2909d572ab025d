package job

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Handler runs jobs of one kind. Work should return when ctx ends (the
// job was cancelled, timed out, or its lease was lost; context.Cause
// says which). Its return value decides the outcome:
//
//   - nil: completed, with the result set by Job.SetResult, if any;
//   - Snooze(d): back to pending for d, not counted as a failed attempt;
//   - Cancel(err): cancelled, not retried;
//   - Permanent(err): failed into the DLQ at once;
//   - any other error (or a panic): a failed attempt, retried with
//     backoff until attempts run out.
type Handler interface {
	Work(ctx context.Context, j *Job) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, j *Job) error

// Work implements Handler.
func (f HandlerFunc) Work(ctx context.Context, j *Job) error { return f(ctx, j) }

// KindOptions tune how jobs of one kind run. Zero fields take defaults.
type KindOptions struct {
	// Backoff between failed attempts. Default DefaultBackoff.
	Backoff Backoff
	// Timeout for jobs of this kind enqueued without one. Default none.
	Timeout time.Duration
	// Check, when set, checks every request of this kind where it enters,
	// after the checks every request gets: a Client with this registry
	// (WithKinds) runs it on enqueue, a cron.Client on an entry's
	// template, a workflow.Client on each step, and so the API on all
	// three. It gets the request as checked so far (defaults filled in,
	// Args a json.RawMessage) and may set its FairnessKey and LimitKey
	// (the http kind makes the destination host the fairness key). Its
	// error refuses the request: a *ValidationError names the field, as
	// in "args.url".
	Check func(r *Request) error
}

type registration struct {
	handler Handler
	opts    KindOptions
}

// Registry maps kinds to handlers. Register before the worker starts;
// lookups are safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	kinds map[string]registration
}

// CheckRequest runs the Check registered with req's kind, if any; nil
// for a kind with none or not registered here. A nil registry checks
// nothing.
func (r *Registry) CheckRequest(req *Request) error {
	if r == nil {
		return nil
	}
	reg, ok := r.lookup(req.Kind)
	if !ok || reg.opts.Check == nil {
		return nil
	}
	return reg.opts.Check(req)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{kinds: map[string]registration{}} }

// Handle registers h for kind, replacing any earlier handler. It panics on
// an invalid kind, as a programming error.
func (r *Registry) Handle(kind string, h Handler, opts ...KindOptions) {
	if err := ValidateKind(kind); err != nil {
		panic(fmt.Sprintf("job: Handle: %v", err))
	}
	var o KindOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kinds[kind] = registration{handler: h, opts: o}
}

// HandleFunc registers a function for kind.
func (r *Registry) HandleFunc(kind string, fn func(ctx context.Context, j *Job) error, opts ...KindOptions) {
	r.Handle(kind, HandlerFunc(fn), opts...)
}

// HandleArgs registers a handler that receives the job's args decoded into
// T. Args that do not decode fail the job permanently: retrying cannot fix
// them.
func HandleArgs[T any](r *Registry, kind string, fn func(ctx context.Context, j *Job, args T) error, opts ...KindOptions) {
	r.HandleFunc(kind, func(ctx context.Context, j *Job) error {
		var args T
		if err := j.UnmarshalArgs(&args); err != nil {
			return Permanent(err)
		}
		return fn(ctx, j, args)
	}, opts...)
}

func (r *Registry) lookup(kind string) (registration, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	reg, ok := r.kinds[kind]
	return reg, ok
}

// Kinds lists the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.kinds))
	for k := range r.kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
