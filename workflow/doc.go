// Package workflow runs DAGs of jobs: a run is a set of named steps with
// dependencies; each step is a job, a durable sleep, or a wait for an
// external signal.
//
// # States
//
//	run:   running ──► completed   (every step completed, or failed with allow_failure)
//	          │  ▲
//	          │  └── a DLQ replay of the failed step (nothing else failed)
//	          ├──► failed          (a step failed for good)
//	          └──► cancelled       (Cancel, or a step's job cancelled)
//
//	step:  waiting ──(no dependency left)──► active ──► completed
//	          │                              ├─────► failed ──(DLQ replay)──► active
//	          │                              └─────► cancelled   (its job cancelled)
//	          └──► cancelled   (the run failed, or was cancelled)
//
//	       cancelled ──(a DLQ replay resumes the failed run)──► waiting
//
// # Durable progress
//
// A trigger on the jobs table advances a run in the transaction that
// finishes a step's job (completion, failure into the DLQ, cancellation,
// lease rescue): the step records its result, its dependents recount the
// dependencies they still wait for, and those left with none are enqueued
// — all in that one transaction. A step's job carries its inputs by
// reference (the jobs its dependencies followed when it started); a claim
// reads their results from the run's steps, where each is stored once, so
// a completion that starts m steps after n results writes m small rows,
// not n × m results, and a definition whose step could receive more than
// MaxStepInputBytes is refused. A dependency is done when it completed, or failed with
// allow_failure; the count is taken from those states, never decremented,
// so a dependency counts once however often it is replayed. A step is
// therefore never lost between "its dependency finished" and "it was
// enqueued", whichever node dies; and a step's job is at-least-once like
// any job, with exactly one completion accepted.
//
// Lock order: a step's job, then its run, then its steps. The statement
// that finishes a job holds the job's row when its trigger locks the run,
// so Cancel locks the jobs of the run's active steps before the run
// (starting over if a step started in between); the other order would
// deadlock with a step completing during the cancel.
//
// # DLQ replay
//
// Replaying a failed step's DLQ entry makes the step active again,
// following the new job, with inputs taken afresh from its dependencies.
// A step that failed with allow_failure was done; replayed, it is not, so
// its dependents still waiting wait for the replay too and see its new
// result (or null, if it fails again). A dependent that had already
// started keeps the inputs it started with: the replay re-runs the step
// alone, and the run completes only once the replay has finished too.
//
// A replay resumes a failed run when no other step holds it failed. Every
// step cancelled while the run was failed then waits again — those the
// failure cancelled before they started, and those whose job was
// cancelled since — and each with no dependency left starts with a new
// job, so the run can finish. (Cancelling a step's job while the run is
// running cancels the run, and no replay resumes a cancelled run.)
//
// Sleep and signal steps are jobs of the built-in kinds gaffer.sleep and
// gaffer.signal, due when the timer ends: durable because they are rows.
// A signal completes the timer job early with its payload. A replayed
// sleep or signal step starts its timer over: a signal step waits for its
// signal again, for its whole timeout, instead of failing at once.
//
// # What this package must never do
//
// Advance a run outside the database transaction that finished its step,
// or start a step before every dependency completed (or failed with
// allow_failure).
package workflow
