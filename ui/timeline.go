package ui

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gafferhq/gaffer/job"
)

// jobTimes are a job's durations and its attempt timeline, from what the
// jobs table records: when it was enqueued (created_at), when its
// current or last attempt was due (run_at) and started (attempted_at),
// when it finished (finalized_at), and each attempt that did not succeed
// with when it ended (errors; the first 3 and latest kept). The start of
// an earlier attempt is not recorded, so only the last attempt has a run
// time.
type jobTimes struct {
	// QueueWait: from the last attempt's due time to its start; for a job
	// not started yet, how long it has waited since due (Waiting).
	QueueWait time.Duration
	HasWait   bool
	Waiting   bool
	// Run is the last attempt's run time: to its end, or so far (Running).
	Run     time.Duration
	HasRun  bool
	Running bool
	// Total is from enqueue to finish, or so far (Unfinished).
	Total      time.Duration
	Unfinished bool
	Events     []timelineEvent
	// The SVG: its size, the axis, the last attempt's wait and run bars.
	Width, Height, Left, Right, Axis int
	WaitFrom, WaitTo, RunFrom, RunTo int
	Start, End                       time.Time
}

// timelineEvent is one instant of a job's life on the timeline.
type timelineEvent struct {
	At     time.Time
	Offset time.Duration // from enqueue
	Label  string
	Detail string
	// Class colours its mark: ok, fail, mark.
	Class string
	X     int
}

func timesOf(j *job.Job, now time.Time) jobTimes {
	t := jobTimes{Width: 900, Height: 64, Left: 16, Right: 884, Axis: 28, Start: j.CreatedAt}
	end := now
	if j.FinalizedAt != nil {
		end = *j.FinalizedAt
	} else {
		t.Unfinished = true
	}
	t.Total = end.Sub(j.CreatedAt)
	add := func(at time.Time, label, detail, class string) {
		t.Events = append(t.Events, timelineEvent{At: at, Offset: at.Sub(j.CreatedAt), Label: label, Detail: detail, Class: class})
	}
	add(j.CreatedAt, "enqueued", "queue "+j.Queue, "mark")
	for _, e := range j.Errors {
		if e.Kind == "omitted" {
			add(e.At, fmt.Sprintf("%d attempts omitted", e.Omitted), "the history keeps the first 3 and the latest", "mark")
			continue
		}
		detail := e.Kind
		if e.Node != "" {
			detail += " on " + e.Node
		}
		add(e.At, fmt.Sprintf("attempt %d ended", e.Attempt), detail, "fail")
	}
	if j.AttemptedAt != nil {
		detail := ""
		if j.Node != "" {
			detail = "on " + j.Node
		}
		add(*j.AttemptedAt, fmt.Sprintf("attempt %d started", j.Attempt), detail, "mark")
		if !j.RunAt.After(*j.AttemptedAt) {
			t.QueueWait, t.HasWait = j.AttemptedAt.Sub(j.RunAt), true
		}
		switch {
		case j.State == job.Running:
			t.Run, t.HasRun, t.Running = now.Sub(*j.AttemptedAt), true, true
		case j.FinalizedAt != nil && !j.FinalizedAt.Before(*j.AttemptedAt):
			t.Run, t.HasRun = j.FinalizedAt.Sub(*j.AttemptedAt), true
		}
	}
	if !j.State.Finished() && j.State != job.Running {
		if j.RunAt.After(now) {
			add(j.RunAt, "due", "the next attempt may start", "mark")
			if j.RunAt.After(end) {
				end = j.RunAt
			}
		} else {
			t.QueueWait, t.HasWait, t.Waiting = now.Sub(j.RunAt), true, true
		}
	}
	if j.FinalizedAt != nil {
		class := "fail"
		if j.State == job.Completed {
			class = "ok"
		}
		add(*j.FinalizedAt, string(j.State), "", class)
	}
	slices.SortStableFunc(t.Events, func(a, b timelineEvent) int { return a.At.Compare(b.At) })
	t.End = end
	x := func(at time.Time) int {
		span := end.Sub(j.CreatedAt)
		if span <= 0 {
			return t.Left
		}
		f := math.Min(math.Max(float64(at.Sub(j.CreatedAt))/float64(span), 0), 1)
		return t.Left + int(math.Round(f*float64(t.Right-t.Left)))
	}
	for i := range t.Events {
		t.Events[i].X = x(t.Events[i].At)
	}
	if j.AttemptedAt != nil {
		if t.HasWait && !t.Waiting {
			t.WaitFrom, t.WaitTo = x(j.RunAt), x(*j.AttemptedAt)
		}
		if t.HasRun {
			runEnd := now
			if j.FinalizedAt != nil {
				runEnd = *j.FinalizedAt
			}
			t.RunFrom, t.RunTo = x(*j.AttemptedAt), max(x(runEnd), x(*j.AttemptedAt)+2)
		}
	} else if t.Waiting {
		t.WaitFrom, t.WaitTo = x(j.RunAt), x(now)
	}
	return t
}
