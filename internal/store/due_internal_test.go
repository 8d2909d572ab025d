package store

import (
	"slices"
	"testing"
	"time"
)

// Whom an insert wakes is decided by the database's clock, not the
// node's: with the database an hour ahead of the node, a job whose run_at
// is half an hour ahead of the node is due, and its queue is woken; a
// delay counts too.
func TestDueQueuesUseTheDatabaseClock(t *testing.T) {
	t.Parallel()
	node := time.Now()
	db := node.Add(time.Hour)
	ps := []InsertParams{
		{Queue: "due-by-db-clock", RunAt: node.Add(30 * time.Minute)},
		{Queue: "now"},
		{Queue: "delayed", Delay: time.Minute},
		{Queue: "later", RunAt: db.Add(time.Second)},
		{Queue: "now"},
	}
	if got := dueQueues(ps, db); !slices.Equal(got, []string{"due-by-db-clock", "now"}) {
		t.Fatalf("woken %v, want [due-by-db-clock now]", got)
	}
}
