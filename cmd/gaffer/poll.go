package main

import (
	"context"
	"time"
)

// pollEvery is how often --wait and --watch ask the API.
const pollEvery = 500 * time.Millisecond

// poll calls check at once and then every m's poll interval until it
// reports done or fails. It returns ctx's error when ctx ends first
// (Ctrl-C).
func (m *Main) poll(ctx context.Context, check func() (done bool, err error)) error {
	every := m.pollEvery
	if every == 0 {
		every = pollEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		done, err := check()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
