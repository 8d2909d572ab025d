package job

import "github.com/gafferhq/gaffer/internal/store"

// FromRow builds a Job from a claimed row, lease included, for tests that
// claim through the store.
func FromRow(r store.Job) *Job { return fromRow(r) }
