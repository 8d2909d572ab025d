package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gafferhq/gaffer/store"
)

// Limits and defaults for a Request.
const (
	DefaultTenant      = "default"
	DefaultQueue       = "default"
	DefaultMaxAttempts = 25
	MaxMaxAttempts     = 1000
	MinPriority        = 0 // runs first
	MaxPriority        = 9 // runs last
	MaxTimeout         = 7 * 24 * time.Hour
	MaxDelay           = 10 * 365 * 24 * time.Hour
	MaxArgsBytes       = 1 << 20
	MaxResultBytes     = 1 << 20
	MaxUniqueKeyLen    = 255
	MaxKeyLen          = 255 // fairness and limit keys
	MaxKindLen         = 128
	MinUniqueFor       = time.Second
	MaxUniqueFor       = 366 * 24 * time.Hour
)

// NamePattern is what a queue, tenant or limit name matches; KindPattern
// what a kind matches (at most MaxKindLen bytes). The API checks path and
// query parameters against the same text.
const (
	NamePattern = `^[a-z0-9][a-z0-9_.-]{0,63}$`
	KindPattern = `^[A-Za-z0-9][A-Za-z0-9_.:/-]*$`
)

var (
	namePattern = regexp.MustCompile(NamePattern)
	kindPattern = regexp.MustCompile(KindPattern)
)

// Request is a job to enqueue. Only Kind is required.
type Request struct {
	// Kind selects the handler. Letters, digits and _ . : / -, at most 128.
	Kind string
	// Args are the handler's input, encoded as JSON. json.RawMessage and
	// []byte are taken as already-encoded JSON; nil means {}.
	Args any
	// Tenant owns the job. Default "default".
	Tenant string
	// Queue the job waits in. Lowercase letters, digits and _ . -, at most
	// 64. Default "default".
	Queue string
	// Priority from 0 (runs first) to 9 (runs last). Default 0.
	Priority int
	// RunAt makes the job due at that instant (within MaxDelay of now,
	// either way); Delay makes it due that long after it is enqueued (by
	// the database clock). Set one, not both.
	RunAt time.Time
	Delay time.Duration
	// MaxAttempts before the job fails into the DLQ. Default 25, at most
	// 1000.
	MaxAttempts int
	// Timeout bounds one attempt; the handler's context ends when it
	// passes. Zero means the handler's own default, or none.
	Timeout time.Duration
	// UniqueKey, when set, makes the enqueue a no-op that returns the
	// existing job while an unfinished job of the same tenant holds the key.
	// UTF-8 without NUL, at most 255 bytes.
	UniqueKey string
	// UniqueStates and UniqueFor give UniqueKey a window (docs/shaping.md):
	// the key is held by a job of the tenant enqueued with a window under
	// the same key that is in one of UniqueStates (any state when empty)
	// and was enqueued less than UniqueFor ago (whenever, when zero). So
	// UniqueStates {Pending, Running, Retrying, Completed} keeps a done
	// job blocking until retention deletes it, and UniqueFor time.Hour
	// lets one job a key an hour in, whatever became of it. UniqueFor is
	// 1s to 366 days. Either needs UniqueKey. Jobs enqueued with a window
	// and jobs enqueued without one do not hold each other's keys. Only
	// Enqueue and EnqueueTx take a window (EnqueueTx in a READ COMMITTED
	// transaction, PostgreSQL's default); EnqueueMany refuses it.
	UniqueStates []State
	UniqueFor    time.Duration
	// Debounce, when set, makes the enqueue a trailing debounce
	// (docs/shaping.md): while a job of the tenant with Debounce.Key has
	// not started, the enqueue replaces that job's args and moves it to
	// run Debounce.Window from now (never past its first enqueue plus
	// Debounce.MaxWait), and returns it (Result.Debounced); otherwise it
	// makes a new job, due Window from now. The job keeps its first
	// enqueue's kind, queue and other options. Not with UniqueKey, RunAt
	// or Delay; only Enqueue and EnqueueTx take it.
	Debounce *Debounce
	// Sequence, when set, enqueues the job into a sequence of its tenant
	// (docs/shaping.md#sequences): the jobs of one sequence run one at a
	// time, in enqueue order — a job starts only once every job enqueued
	// into the sequence before it has ended (completed, failed or
	// cancelled; a retrying job still holds its turn). Until its turn
	// the job is Held. Not with UniqueKey or Debounce.
	Sequence *Sequence
	// FairnessKey splits the tenant's jobs of the queue into units that
	// claims serve in turn, as they serve tenants: jobs with different
	// keys do not wait behind each other. Default "" (one unit per
	// tenant). At most 255 bytes.
	FairnessKey string
	// LimitKey is the key limits with key "limit_key" count the job
	// under (see Limit). At most 255 bytes.
	LimitKey string
	// Tags label the job for search (Filter.Tags): at most MaxTags, each
	// matching TagPattern; a repeat is dropped. Default none.
	Tags []string
	// Batch, when not 0, enqueues the job into that open batch of the
	// tenant (Client.OpenBatch; docs/shaping.md, "Batches"): the batch's
	// callback waits for it. A closed batch refuses it (ErrBatchClosed),
	// nothing written. Not with UniqueKey or Debounce; in EnqueueMany
	// every request names the same batch, or none does.
	Batch int64
}

// Debounce is a Request's trailing debounce.
type Debounce struct {
	// Key names the debounced job within its tenant: UTF-8 without NUL,
	// at most 255 bytes.
	Key string
	// Window is how long after the last enqueue of the key the job runs:
	// 1ms to MaxDebounceWindow.
	Window time.Duration
	// MaxWait bounds how long after the first enqueue the job may be
	// moved to, so that a steady stream of enqueues still runs it: 0 (no
	// bound) or Window to MaxDebounceMaxWait.
	MaxWait time.Duration
}

// Sequence is a Request's sequence.
type Sequence struct {
	// Key names the sequence within the tenant: UTF-8 without NUL, at
	// most 255 bytes. Or set KeyArgs instead.
	Key string
	// KeyArgs derives the key from the job's kind and the values of
	// these top-level fields of its args (1 to MaxSequenceKeyArgs
	// names): jobs of one kind with equal values (as compact JSON; a
	// missing field is null) share a sequence. A derived key longer than
	// 255 bytes is replaced by "sha256:" and its hash.
	KeyArgs []string
	// OnFailure says what a job's failure (into the DLQ) does to its
	// sequence: SequenceHalt (the default) stops it until the job is
	// replayed, the job is deleted or the sequence is resumed;
	// SequenceContinue lets the next job run. A cancelled job always lets
	// the next one run.
	OnFailure string
}

// Sequence failure policies.
const (
	SequenceHalt     = "halt"
	SequenceContinue = "continue"
)

// MaxSequenceKeyArgs bounds Sequence.KeyArgs.
const MaxSequenceKeyArgs = 8

// Bounds of a Debounce.
const (
	MaxDebounceWindow  = 7 * 24 * time.Hour
	MaxDebounceMaxWait = 30 * 24 * time.Hour
)

// ValidateName checks a queue or tenant name.
func ValidateName(field, name string) error {
	if !namePattern.MatchString(name) {
		return &ValidationError{Field: field, Message: fmt.Sprintf("%q is not a valid name: use 1-64 lowercase letters, digits, '_', '.' or '-', starting with a letter or digit", name)}
	}
	return nil
}

// ReservedKindPrefix starts the kinds Gaffer runs itself: gaffer.sleep
// and gaffer.signal are a workflow's sleep and signal steps. Only the
// workflow package makes jobs of them; a tenant that enqueued one outside
// a workflow, or a remote worker that claimed one, could finish a step's
// wait itself, so the API refuses both (reserved_kind).
const ReservedKindPrefix = "gaffer."

// WithoutTimers is jobs less the workflow timers among them (kinds under
// ReservedKindPrefix: a workflow's sleep and signal steps), which lists
// leave out unless asked: they are Gaffer's, not the user's. A list
// hides them from the page it read — never reading further for more —
// so that hiding costs nothing however many timers wait, and continues
// after the page's last row read, timer or not.
func WithoutTimers(jobs []*Job) []*Job {
	out := jobs[:0:0]
	for _, j := range jobs {
		if !strings.HasPrefix(j.Kind, ReservedKindPrefix) {
			out = append(out, j)
		}
	}
	return out
}

// ValidateKind checks a job kind.
func ValidateKind(kind string) error {
	if kind == "" {
		return &ValidationError{Field: "kind", Message: "is required"}
	}
	if len(kind) > MaxKindLen || !kindPattern.MatchString(kind) {
		return &ValidationError{Field: "kind", Message: fmt.Sprintf("%q is not a valid kind: use up to %d letters, digits, '_', '.', ':', '/' or '-'", kind, MaxKindLen)}
	}
	return nil
}

// Check validates r as Enqueue does and returns it with its defaults
// filled in (tenant, queue, max attempts) and its args encoded as
// json.RawMessage. The error is a *ValidationError naming the field.
func (r Request) Check() (Request, error) {
	p, err := r.params()
	if err != nil {
		return r, err
	}
	return requestOf(p), nil
}

func requestOf(p store.InsertParams) Request {
	r := Request{Kind: p.Kind, Args: p.Args, Tenant: p.Tenant, Queue: p.Queue, Priority: p.Priority,
		MaxAttempts: p.MaxAttempts, Timeout: p.Timeout, RunAt: p.RunAt, Delay: p.Delay, UniqueKey: p.UniqueKey,
		FairnessKey: p.FairnessKey, LimitKey: p.LimitKey, UniqueFor: p.UniqueFor, Tags: p.Tags, Batch: p.Batch}
	if p.DebounceKey != "" {
		r.Debounce = &Debounce{Key: p.DebounceKey, Window: p.DebounceWindow, MaxWait: p.DebounceMaxWait}
	}
	if p.SequenceKey != "" {
		r.Sequence = &Sequence{Key: p.SequenceKey, OnFailure: SequenceContinue}
		if p.SequenceHalt {
			r.Sequence.OnFailure = SequenceHalt
		}
	}
	for _, st := range p.UniqueStates {
		r.UniqueStates = append(r.UniqueStates, State(st))
	}
	return r
}

// params validates r, fills in defaults, and returns what the store
// inserts. The error is a *ValidationError naming the field.
func (r Request) params() (store.InsertParams, error) {
	p := store.InsertParams{
		Tenant: r.Tenant, Kind: r.Kind, Queue: r.Queue, Priority: r.Priority,
		MaxAttempts: r.MaxAttempts, Timeout: r.Timeout, RunAt: r.RunAt, Delay: r.Delay, UniqueKey: r.UniqueKey,
		FairnessKey: r.FairnessKey, LimitKey: r.LimitKey, Batch: r.Batch,
	}
	if p.Tenant == "" {
		p.Tenant = DefaultTenant
	}
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if err := ValidateKind(p.Kind); err != nil {
		return p, err
	}
	if err := ValidateName("tenant", p.Tenant); err != nil {
		return p, err
	}
	if err := ValidateName("queue", p.Queue); err != nil {
		return p, err
	}
	switch {
	case p.Priority < MinPriority || p.Priority > MaxPriority:
		return p, &ValidationError{Field: "priority", Message: fmt.Sprintf("must be between %d and %d, got %d", MinPriority, MaxPriority, p.Priority)}
	case p.MaxAttempts < 1 || p.MaxAttempts > MaxMaxAttempts:
		return p, &ValidationError{Field: "max_attempts", Message: fmt.Sprintf("must be between 1 and %d, got %d", MaxMaxAttempts, p.MaxAttempts)}
	case p.Timeout < 0 || p.Timeout > MaxTimeout:
		return p, &ValidationError{Field: "timeout", Message: fmt.Sprintf("must be between 0 and %s, got %s", MaxTimeout, p.Timeout)}
	case p.Timeout%time.Millisecond != 0:
		return p, &ValidationError{Field: "timeout", Message: "must be a whole number of milliseconds"}
	case p.Delay < 0:
		return p, &ValidationError{Field: "delay", Message: fmt.Sprintf("must not be negative, got %s", p.Delay)}
	case p.Delay > MaxDelay:
		return p, &ValidationError{Field: "delay", Message: fmt.Sprintf("must be at most %s", MaxDelay)}
	case !p.RunAt.IsZero() && p.Delay != 0:
		return p, &ValidationError{Field: "run_at", Message: "set run_at or delay, not both"}
	case !p.RunAt.IsZero() && (p.RunAt.Before(time.Now().Add(-MaxDelay)) || p.RunAt.After(time.Now().Add(MaxDelay))):
		return p, &ValidationError{Field: "run_at", Message: fmt.Sprintf("must be within %s of now, got %s", MaxDelay, p.RunAt.Format(time.RFC3339))}
	case len(p.UniqueKey) > MaxUniqueKeyLen:
		return p, &ValidationError{Field: "unique_key", Message: fmt.Sprintf("must be at most %d bytes", MaxUniqueKeyLen)}
	case !validText(p.UniqueKey):
		return p, &ValidationError{Field: "unique_key", Message: "must be UTF-8 without NUL characters"}
	case len(p.FairnessKey) > MaxKeyLen || !validText(p.FairnessKey):
		return p, &ValidationError{Field: "fairness_key", Message: fmt.Sprintf("must be UTF-8 without NUL characters, at most %d bytes", MaxKeyLen)}
	case len(p.LimitKey) > MaxKeyLen || !validText(p.LimitKey):
		return p, &ValidationError{Field: "limit_key", Message: fmt.Sprintf("must be UTF-8 without NUL characters, at most %d bytes", MaxKeyLen)}
	}
	if err := r.uniqueWindow(&p); err != nil {
		return p, err
	}
	if err := r.debounce(&p); err != nil {
		return p, err
	}
	if err := ValidateTags("tags", r.Tags); err != nil {
		return p, err
	}
	p.Tags = normalTags(r.Tags)
	switch {
	case r.Batch < 0:
		return p, &ValidationError{Field: "batch", Message: fmt.Sprintf("must be a batch id, got %d", r.Batch)}
	case r.Batch != 0 && (r.UniqueKey != "" || r.Debounce != nil):
		return p, &ValidationError{Field: "batch", Message: "cannot be combined with unique_key or debounce: every job enqueued into a batch is a new job the batch waits for"}
	}
	args, err := EncodeArgs(r.Args)
	if err != nil {
		return p, err
	}
	p.Args = args
	if err := r.sequence(&p); err != nil {
		return p, err
	}
	return p, nil
}

// sequence checks r's sequence and sets it in p (after p.Args, from
// which a key may be derived).
func (r Request) sequence(p *store.InsertParams) error {
	s := r.Sequence
	if s == nil {
		return nil
	}
	switch {
	case s.Key == "" && len(s.KeyArgs) == 0:
		return &ValidationError{Field: "sequence.key", Message: "is required (or key_args)"}
	case s.Key != "" && len(s.KeyArgs) > 0:
		return &ValidationError{Field: "sequence.key_args", Message: "set key or key_args, not both"}
	case len(s.Key) > MaxKeyLen || !validText(s.Key):
		return &ValidationError{Field: "sequence.key", Message: fmt.Sprintf("must be UTF-8 without NUL characters, at most %d bytes", MaxKeyLen)}
	case len(s.KeyArgs) > MaxSequenceKeyArgs:
		return &ValidationError{Field: "sequence.key_args", Message: fmt.Sprintf("at most %d field names, got %d", MaxSequenceKeyArgs, len(s.KeyArgs))}
	case s.OnFailure != "" && s.OnFailure != SequenceHalt && s.OnFailure != SequenceContinue:
		return &ValidationError{Field: "sequence.on_failure", Message: fmt.Sprintf("must be %q or %q, got %q", SequenceHalt, SequenceContinue, clip([]byte(s.OnFailure), 40))}
	case r.UniqueKey != "":
		return &ValidationError{Field: "sequence", Message: "cannot be combined with unique_key: an enqueue that answers another job must not take a turn in the sequence"}
	case r.Debounce != nil:
		return &ValidationError{Field: "sequence", Message: "cannot be combined with debounce"}
	}
	key := s.Key
	if len(s.KeyArgs) > 0 {
		var err error
		if key, err = sequenceKeyOf(p.Kind, p.Args, s.KeyArgs); err != nil {
			return err
		}
	}
	p.SequenceKey, p.SequenceHalt = key, s.OnFailure != SequenceContinue
	return nil
}

// sequenceKeyOf is the sequence key of a job of kind with args, from the
// values of the named top-level fields: kind(v1,v2,…), each value as
// compact JSON, or "sha256:" and the hash of that when it is longer than
// MaxKeyLen.
func sequenceKeyOf(kind string, args json.RawMessage, fields []string) (string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return "", &ValidationError{Field: "sequence.key_args", Message: "needs args that are a JSON object"}
	}
	var b strings.Builder
	b.WriteString(kind)
	b.WriteByte('(')
	for i, f := range fields {
		if f == "" || len(f) > 64 || !validText(f) {
			return "", &ValidationError{Field: fmt.Sprintf("sequence.key_args[%d]", i), Message: "must be a field name of 1 to 64 bytes, UTF-8 without NUL characters"}
		}
		if i > 0 {
			b.WriteByte(',')
		}
		v, ok := obj[f]
		if !ok {
			b.WriteString("null")
			continue
		}
		var c bytes.Buffer
		if err := json.Compact(&c, v); err != nil {
			return "", &ValidationError{Field: "args", Message: err.Error()}
		}
		b.Write(c.Bytes())
	}
	b.WriteByte(')')
	key := b.String()
	if len(key) > MaxKeyLen || !validText(key) {
		sum := sha256.Sum256([]byte(key))
		key = "sha256:" + hex.EncodeToString(sum[:])
	}
	return key, nil
}

// uniqueWindow checks r's uniqueness window and sets it in p: its
// states, each once, in States' order.
func (r Request) uniqueWindow(p *store.InsertParams) error {
	for _, st := range r.UniqueStates {
		if !st.Valid() {
			return &ValidationError{Field: "unique_states", Message: fmt.Sprintf("must be job states, of %s; got %q", stateNames(), clip([]byte(st), 40))}
		}
	}
	switch {
	case r.UniqueFor < 0 || (r.UniqueFor > 0 && r.UniqueFor < MinUniqueFor) || r.UniqueFor > MaxUniqueFor:
		return &ValidationError{Field: "unique_for", Message: fmt.Sprintf("must be between %s and %s, got %s", MinUniqueFor, MaxUniqueFor, r.UniqueFor)}
	case r.UniqueFor%time.Millisecond != 0:
		return &ValidationError{Field: "unique_for", Message: "must be a whole number of milliseconds"}
	case (len(r.UniqueStates) > 0 || r.UniqueFor > 0) && r.UniqueKey == "":
		return &ValidationError{Field: "unique_key", Message: "is required with unique_states or unique_for"}
	}
	p.UniqueStates, p.UniqueFor = nil, r.UniqueFor
	for _, st := range States {
		if slices.Contains(r.UniqueStates, st) {
			p.UniqueStates = append(p.UniqueStates, string(st))
		}
	}
	return nil
}

// debounce checks r's debounce and sets it in p.
func (r Request) debounce(p *store.InsertParams) error {
	d := r.Debounce
	if d == nil {
		return nil
	}
	switch {
	case d.Key == "":
		return &ValidationError{Field: "debounce.key", Message: "is required"}
	case len(d.Key) > MaxKeyLen || !validText(d.Key):
		return &ValidationError{Field: "debounce.key", Message: fmt.Sprintf("must be UTF-8 without NUL characters, at most %d bytes", MaxKeyLen)}
	case d.Window < time.Millisecond || d.Window > MaxDebounceWindow || d.Window%time.Millisecond != 0:
		return &ValidationError{Field: "debounce.window", Message: fmt.Sprintf("must be a whole number of milliseconds from 1ms to %s, got %s", MaxDebounceWindow, d.Window)}
	case d.MaxWait != 0 && (d.MaxWait < d.Window || d.MaxWait > MaxDebounceMaxWait || d.MaxWait%time.Millisecond != 0):
		return &ValidationError{Field: "debounce.max_wait", Message: fmt.Sprintf("must be 0 (no bound) or a whole number of milliseconds from the window (%s) to %s, got %s", d.Window, MaxDebounceMaxWait, d.MaxWait)}
	case r.UniqueKey != "":
		return &ValidationError{Field: "debounce", Message: "cannot be combined with unique_key: the debounce key already names one pending job"}
	case !r.RunAt.IsZero() || r.Delay != 0:
		return &ValidationError{Field: "debounce", Message: "cannot be combined with run_at or delay: the window sets when the job runs"}
	}
	p.DebounceKey, p.DebounceWindow, p.DebounceMaxWait = d.Key, d.Window, d.MaxWait
	return nil
}

// EncodeArgs encodes and checks job args: valid JSON, at most
// MaxArgsBytes, and text CheckJSONText accepts. JSON text (json.RawMessage
// or []byte) is kept byte for byte; other values are encoded with
// EncodeJSON.
func EncodeArgs(v any) (json.RawMessage, error) {
	var b []byte
	switch a := v.(type) {
	case nil:
		return json.RawMessage(`{}`), nil
	case json.RawMessage:
		b = a
	case []byte:
		b = a
	default:
		var err error
		if b, err = EncodeJSON(v); err != nil {
			return nil, &ValidationError{Field: "args", Message: "cannot be encoded as JSON: " + err.Error()}
		}
	}
	if b = trimSpace(b); len(b) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if err := checkPayload("args", b, MaxArgsBytes); err != nil {
		return nil, err
	}
	return json.RawMessage(b), nil
}

func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
