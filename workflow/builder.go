package workflow

import (
	"encoding/json"
	"time"

	"github.com/gafferhq/gaffer/job"
)

// Builder assembles a Definition in Go:
//
//	def, err := workflow.New("nightly-etl").
//		Job("extract", "etl.extract", ExtractArgs{Day: day}).
//		Job("transform", "etl.transform", nil, workflow.After("extract")).
//		Job("load", "etl.load", nil, workflow.After("transform"), workflow.Queue("db")).
//		Definition()
type Builder struct {
	def Definition
	err error
}

// New starts a workflow definition.
func New(name string) *Builder { return &Builder{def: Definition{Name: name}} }

// StepOption tunes a step.
type StepOption func(*Step)

// After makes the step wait for the named steps to complete.
func After(steps ...string) StepOption {
	return func(s *Step) { s.DependsOn = append(s.DependsOn, steps...) }
}

// Queue puts the step's job in queue q.
func Queue(q string) StepOption { return func(s *Step) { s.Queue = q } }

// Priority sets the step's job priority (0 first … 9 last).
func Priority(p int) StepOption { return func(s *Step) { s.Priority = p } }

// MaxAttempts sets the step's job attempts.
func MaxAttempts(n int) StepOption { return func(s *Step) { s.MaxAttempts = n } }

// Timeout bounds each attempt of the step's job.
func Timeout(d time.Duration) StepOption { return func(s *Step) { s.Timeout = d } }

// AllowFailure lets the run go on if this step fails for good: its
// dependents start, seeing a null result.
func AllowFailure() StepOption { return func(s *Step) { s.AllowFailure = true } }

// Tenant sets the tenant the run belongs to.
func (b *Builder) Tenant(t string) *Builder {
	b.def.Tenant = t
	return b
}

// Job adds a step that runs a job of kind with args (encoded as JSON).
func (b *Builder) Job(name, kind string, args any, opts ...StepOption) *Builder {
	s := Step{Name: name, Kind: kind}
	if args != nil {
		raw, err := job.EncodeArgs(args)
		if err != nil && b.err == nil {
			b.err = err
		}
		s.Args = json.RawMessage(raw)
	}
	return b.add(s, opts)
}

// Sleep adds a durable timer: the step completes d after it starts.
func (b *Builder) Sleep(name string, d time.Duration, opts ...StepOption) *Builder {
	return b.add(Step{Name: name, Sleep: d}, opts)
}

// WaitSignal adds a step that completes when Client.Signal delivers a
// payload (its result), and fails if none arrives within timeout.
func (b *Builder) WaitSignal(name string, timeout time.Duration, opts ...StepOption) *Builder {
	return b.add(Step{Name: name, Signal: timeout}, opts)
}

func (b *Builder) add(s Step, opts []StepOption) *Builder {
	for _, o := range opts {
		o(&s)
	}
	b.def.Steps = append(b.def.Steps, s)
	return b
}

// Definition returns the definition, validated.
func (b *Builder) Definition() (Definition, error) {
	if b.err != nil {
		return Definition{}, b.err
	}
	if err := b.def.Validate(); err != nil {
		return Definition{}, err
	}
	return b.def, nil
}
