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
//	step:  waiting ──(last dependency done)──► active ──► completed
//	          │                                   ├──────► failed ──(DLQ replay)──► active
//	          └──► cancelled (run failed/cancelled) └──────► cancelled
//
// # Durable progress
//
// A trigger on the jobs table advances a run in the transaction that
// finishes a step's job (completion, failure into the DLQ, cancellation,
// lease rescue): the step records its result, its dependents' dependency
// counts drop, and those reaching zero are enqueued with their
// dependencies' results as inputs — all in that one transaction. A step is
// therefore never lost between "its dependency finished" and "it was
// enqueued", whichever node dies; and a step's job is at-least-once like
// any job, with exactly one completion accepted.
//
// Sleep and signal steps are jobs of the built-in kinds gaffer.sleep and
// gaffer.signal, due when the timer ends: durable because they are rows.
// A signal completes the timer job early with its payload.
//
// # What this package must never do
//
// Advance a run outside the database transaction that finished its step,
// or start a step before every dependency completed (or failed with
// allow_failure).
package workflow
