package job

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gafferhq/gaffer/store"
)

// MaxProgressMessage bounds a progress message, in bytes.
const MaxProgressMessage = 256

// Progress is how far a running attempt said it got. The job keeps the
// last report of its last attempt to make one.
type Progress struct {
	// Percent is from 0 to 100.
	Percent float64 `json:"percent"`
	// Message is a short text for people (printable UTF-8, at most
	// MaxProgressMessage bytes; may be empty).
	Message string `json:"message"`
	// Attempt is the attempt that reported it: a new attempt starts with
	// its predecessor's last report until it makes its own.
	Attempt int `json:"attempt"`
	// At is when it was reported (database clock).
	At time.Time `json:"at"`
}

func progressOf(p *store.Progress) *Progress {
	if p == nil {
		return nil
	}
	return &Progress{Percent: p.Percent, Message: p.Message, Attempt: p.Attempt, At: p.At}
}

// CheckProgress checks a progress report: percent a number from 0 to 100,
// message printable UTF-8 of at most MaxProgressMessage bytes, with no
// control characters (it is shown as one line in the dashboard and the
// CLI). The error is a *ValidationError naming "percent" or "message".
func CheckProgress(percent float64, message string) error {
	if math.IsNaN(percent) || percent < 0 || percent > 100 {
		return &ValidationError{Field: "percent", Message: fmt.Sprintf("must be a number from 0 to 100, got %v", percent)}
	}
	if len(message) > MaxProgressMessage {
		return &ValidationError{Field: "message", Message: fmt.Sprintf("must be at most %d bytes, got %d", MaxProgressMessage, len(message))}
	}
	if !utf8.ValidString(message) {
		return &ValidationError{Field: "message", Message: "must be UTF-8"}
	}
	for _, r := range message {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return &ValidationError{Field: "message", Message: fmt.Sprintf("must hold no control characters, got %U", r)}
		}
	}
	return nil
}

// errNotRunningHere: SetProgress on a job that is not an attempt this
// process runs (one read with Client.Get, say).
var errNotRunningHere = errors.New("progress can be set only by the handler running the attempt")

// SetProgress records how far the running attempt got — percent from 0
// to 100 and a short message (see CheckProgress) — for the job's API
// view, `gaffer jobs get` and the dashboard's job page. It writes at
// once, compare-and-set on the attempt's lease like every write of an
// attempt: once the attempt no longer owns the job (its lease expired
// and the job moved on, or it was released) it records nothing and
// returns an error wrapping ErrLeaseLost. A bad value returns a
// *ValidationError and writes nothing. ctx bounds the write. Each call is
// one small write: report every second or so, not every item.
func (j *Job) SetProgress(ctx context.Context, percent float64, message string) error {
	if err := CheckProgress(percent, message); err != nil {
		return err
	}
	if j.st == nil {
		return fmt.Errorf("job %d: %w", j.ID, errNotRunningHere)
	}
	err := j.st.SetProgress(ctx, j.lease, percent, message)
	if errors.Is(err, store.ErrStale) {
		return fmt.Errorf("job %d: set progress: %w", j.ID, ErrLeaseLost)
	}
	return err
}
