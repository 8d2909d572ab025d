package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

var sqlStepInputs = query("step_inputs")

// MaxClaimInputBytes bounds the workflow step inputs one claim reads and
// hands on: a claim of many steps each with a wide fan-in would otherwise
// send the claimer (a node, or a remote worker's response) up to the
// claim's size times a step's input budget. The first step job of a
// claim always gets its inputs (a definition bounds one step's inputs:
// workflow.MaxStepInputBytes, at most half of this); the jobs past the
// bound are given back at once, unstarted (ReleaseJobs), for a later
// claim.
const MaxClaimInputBytes = 64 << 20

// claimInputBudget is MaxClaimInputBytes, smaller in tests.
var claimInputBudget int64 = MaxClaimInputBytes

// releasedForInputs is the error a job given back by a claim over
// MaxClaimInputBytes records (kind "released": no attempt is used up).
const releasedForInputs = "given back by its claim: the claim's step inputs were over its budget"

// readStepInputs sets the Inputs of the jobs that carry them by reference
// (InputsFrom), reading them from the run's steps in one round trip, at
// most budget bytes of them in the jobs' order (the first always). It
// returns the indexes of the jobs whose inputs were left unread for the
// budget. Jobs without InputsFrom cost nothing: no statement runs when
// none has it.
func (s *Store) readStepInputs(ctx context.Context, q DB, jobs []Job, budget int64) ([]int, error) {
	var (
		ids []int64
		at  = map[int64]int{}
	)
	for i, j := range jobs {
		if j.InputsFrom != nil {
			ids = append(ids, j.ID)
			at[j.ID] = i
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.db(q).Query(ctx, sqlStepInputs, ids, budget)
	if err != nil {
		return nil, fmt.Errorf("read step inputs: %w", err)
	}
	var (
		over   []int
		id     int64
		sent   bool
		inputs []byte
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &sent, &inputs}, func() error {
		i := at[id]
		if !sent {
			over = append(over, i)
			return nil
		}
		jobs[i].Inputs = jsonValue(append([]byte(nil), inputs...))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read step inputs: %w", err)
	}
	return over, nil
}
