package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// Step types.
const (
	TypeJob    = "job"
	TypeSleep  = "sleep"
	TypeSignal = "signal"
)

// Built-in kinds that carry sleep and signal steps; every node handles
// them (RegisterBuiltins).
const (
	KindSleep  = "gaffer.sleep"
	KindSignal = "gaffer.signal"
)

// Limits of a definition.
const (
	MaxSteps        = 1000
	MaxDependencies = 100
	MaxWait         = 366 * 24 * time.Hour
	// MaxStepInputBytes is the budget of one step's inputs: its
	// dependencies' results, each up to job.MaxResultBytes (a sleep
	// step's is empty). A definition whose step could be handed more is
	// refused (CodeStepInputsOverBudget): at 1 MiB a result, a step
	// depends on at most 32 job or signal steps. A claim reads at most
	// store.MaxClaimInputBytes of inputs in all.
	MaxStepInputBytes = 32 << 20
)

// CodeStepInputsOverBudget is the code of the validation error that
// refuses a step whose inputs could exceed MaxStepInputBytes.
const CodeStepInputsOverBudget = "step_inputs_over_budget"

// Step is one step of a workflow: a job (Kind), a durable sleep (Sleep),
// or a wait for an external signal (Signal: the timeout).
type Step struct {
	Name         string          `json:"name"`
	Kind         string          `json:"kind,omitempty"`
	Args         json.RawMessage `json:"args,omitempty"`
	Queue        string          `json:"queue,omitempty"`
	Priority     int             `json:"priority,omitempty"`
	MaxAttempts  int             `json:"max_attempts,omitempty"`
	Timeout      time.Duration   `json:"-"`
	DependsOn    []string        `json:"depends_on,omitempty"`
	AllowFailure bool            `json:"allow_failure,omitempty"`
	// Sleep makes the step a durable timer of this length.
	Sleep time.Duration `json:"-"`
	// Signal makes the step wait for Client.Signal, failing after this
	// long without one.
	Signal time.Duration `json:"-"`
}

// Definition is a workflow to run: named steps with dependencies.
type Definition struct {
	Name   string `json:"name"`
	Tenant string `json:"tenant,omitempty"`
	Steps  []Step `json:"steps"`
}

// StepNamePattern is what a step's name matches.
const StepNamePattern = `^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`

var (
	stepName = regexp.MustCompile(StepNamePattern)
	runName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$`)
)

func stepErr(i int, field, format string, args ...any) error {
	return &job.ValidationError{Field: fmt.Sprintf("steps[%d].%s", i, field), Message: fmt.Sprintf(format, args...)}
}

// Validate checks the definition. Errors are *job.ValidationError naming
// the field: a missing or duplicate name, an unknown dependency, a cycle
// (with its path), size limits, and every job field of every step.
func (d Definition) Validate() error {
	_, err := d.steps(nil)
	return err
}

// steps checks the definition, each step's job also with its kind's check
// in kinds, and returns the steps to store.
func (d Definition) steps(kinds *job.Registry) ([]store.WorkflowStepParams, error) {
	if !runName.MatchString(d.Name) {
		return nil, &job.ValidationError{Field: "name", Message: fmt.Sprintf("%q is not a valid workflow name: 1-128 letters, digits, '_', '.', ':', '/' or '-'", d.Name)}
	}
	if len(d.Steps) == 0 {
		return nil, &job.ValidationError{Field: "steps", Message: "a workflow needs at least one step"}
	}
	if len(d.Steps) > MaxSteps {
		return nil, &job.ValidationError{Field: "steps", Message: fmt.Sprintf("at most %d steps, got %d", MaxSteps, len(d.Steps))}
	}
	index := map[string]int{}
	for i, s := range d.Steps {
		if !stepName.MatchString(s.Name) {
			return nil, stepErr(i, "name", "%q is not a valid step name: 1-64 letters, digits, '_', '.', ':' or '-'", s.Name)
		}
		if j, dup := index[s.Name]; dup {
			return nil, stepErr(i, "name", "duplicate step %q (also steps[%d])", s.Name, j)
		}
		index[s.Name] = i
	}
	out := make([]store.WorkflowStepParams, len(d.Steps))
	for i, s := range d.Steps {
		if len(s.DependsOn) > MaxDependencies {
			return nil, stepErr(i, "depends_on", "at most %d dependencies, got %d", MaxDependencies, len(s.DependsOn))
		}
		seen := map[string]bool{}
		for _, dep := range s.DependsOn {
			if _, ok := index[dep]; !ok {
				return nil, stepErr(i, "depends_on", "step %q depends on unknown step %q", s.Name, dep)
			}
			if dep == s.Name {
				return nil, stepErr(i, "depends_on", "step %q depends on itself", s.Name)
			}
			if seen[dep] {
				return nil, stepErr(i, "depends_on", "step %q lists %q twice", s.Name, dep)
			}
			seen[dep] = true
		}
		if err := inputBudget(i, s, d.Steps, index); err != nil {
			return nil, err
		}
		p, err := s.params(i, kinds)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	if cycle := findCycle(d.Steps, index); cycle != nil {
		return nil, &job.ValidationError{Field: "steps", Message: "dependency cycle: " + strings.Join(cycle, " → ")}
	}
	return out, nil
}

// inputBudget refuses step i when its dependencies' results could add up
// to more than MaxStepInputBytes: the inputs a claim reads and hands to
// its worker, whatever the results turn out to be.
func inputBudget(i int, s Step, steps []Step, index map[string]int) error {
	var could int64
	for _, dep := range s.DependsOn {
		if steps[index[dep]].Sleep == 0 {
			could += job.MaxResultBytes
		}
	}
	if could <= MaxStepInputBytes {
		return nil
	}
	return &job.ValidationError{Field: fmt.Sprintf("steps[%d].depends_on", i), Code: CodeStepInputsOverBudget,
		Message: fmt.Sprintf("step %q could receive %d MiB of inputs (%d dependencies with results of up to %d MiB each), over the budget of %d MiB for one step's inputs: depend on at most %d job or signal steps, or join them in stages",
			s.Name, could>>20, could/job.MaxResultBytes, job.MaxResultBytes>>20, MaxStepInputBytes>>20, MaxStepInputBytes/job.MaxResultBytes)}
}

func (s Step) params(i int, kinds *job.Registry) (store.WorkflowStepParams, error) {
	p := store.WorkflowStepParams{Name: s.Name, Type: TypeJob, DependsOn: s.DependsOn, AllowFailure: s.AllowFailure}
	kind, args := s.Kind, s.Args
	switch {
	case s.Sleep != 0 && s.Signal != 0:
		return p, stepErr(i, "sleep", "a step is a sleep or a signal wait, not both")
	case s.Sleep != 0 || s.Signal != 0:
		wait, field := s.Sleep, "sleep"
		p.Type, kind = TypeSleep, KindSleep
		if s.Signal != 0 {
			wait, field = s.Signal, "signal"
			p.Type, kind = TypeSignal, KindSignal
		}
		if s.Kind != "" || len(s.Args) > 0 {
			return p, stepErr(i, field, "a %s step has no kind or args", field)
		}
		if wait < time.Second || wait > MaxWait || wait%time.Millisecond != 0 {
			return p, stepErr(i, field, "must be between 1s and %s, got %s", MaxWait, wait)
		}
		p.Wait = wait
	case s.Kind == "":
		return p, stepErr(i, "kind", "is required (or make the step a sleep or a signal wait)")
	case strings.HasPrefix(s.Kind, job.ReservedKindPrefix):
		return p, stepErr(i, "kind", "%q is reserved", s.Kind)
	}
	maxAttempts := s.MaxAttempts
	if p.Type != TypeJob {
		maxAttempts = 1 // a timer that fires fails at once: a signal that never came
	}
	params, err := job.Request{Kind: kind, Args: args, Queue: s.Queue, Priority: s.Priority, MaxAttempts: maxAttempts, Timeout: s.Timeout}.Check()
	if err == nil {
		err = kinds.CheckRequest(&params)
	}
	if err != nil {
		var ve *job.ValidationError
		if errors.As(err, &ve) {
			return p, &job.ValidationError{Field: fmt.Sprintf("steps[%d].%s", i, ve.Field), Message: ve.Message, Code: ve.Code}
		}
		return p, err
	}
	p.Kind, p.Queue, p.Args, p.Priority, p.MaxAttempts, p.Timeout = params.Kind, params.Queue, params.Args.(json.RawMessage), params.Priority, params.MaxAttempts, params.Timeout
	return p, nil
}

// findCycle returns a dependency cycle as step names (first repeated at
// the end), or nil.
func findCycle(steps []Step, index map[string]int) []string {
	const (
		unseen = iota
		onPath
		done
	)
	mark := make([]int, len(steps))
	var path []string
	var visit func(i int) []string
	visit = func(i int) []string {
		mark[i] = onPath
		path = append(path, steps[i].Name)
		deps := append([]string(nil), steps[i].DependsOn...)
		sort.Strings(deps)
		for _, d := range deps {
			j := index[d]
			switch mark[j] {
			case onPath:
				for k, n := range path {
					if n == d {
						return append(append([]string(nil), path[k:]...), d)
					}
				}
			case unseen:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		mark[i] = done
		return nil
	}
	for i := range steps {
		if mark[i] == unseen {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}
