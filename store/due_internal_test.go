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
	if got, _ := dueQueues(ps, db); !slices.Equal(got, []string{"due-by-db-clock", "now"}) {
		t.Fatalf("woken %v, want [due-by-db-clock now]", got)
	}
}

// An insert names the fairness units of its due jobs, once each, for side
// claims; a batch of more than MaxNotifiedUnits units names none.
func TestDueUnits(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ps := []InsertParams{
		{Queue: "q", Tenant: "a"},
		{Queue: "q", Tenant: "b", FairnessKey: "k"},
		{Queue: "q", Tenant: "a"},
		{Queue: "q", Tenant: "c", Delay: time.Minute},
		{Queue: "r", Tenant: "a"},
	}
	_, u := dueQueues(ps, now)
	if !slices.Equal(u.queues, []string{"q", "q", "r"}) || !slices.Equal(u.tenants, []string{"a", "b", "a"}) ||
		!slices.Equal(u.fkeys, []string{"", "k", ""}) {
		t.Fatalf("units %+v, want q/a, q/b/k, r/a", u)
	}
	var many []InsertParams
	for i := range MaxNotifiedUnits + 1 {
		many = append(many, InsertParams{Queue: "q", Tenant: "a", FairnessKey: string(rune('a' + i))})
	}
	if _, u := dueQueues(many[:MaxNotifiedUnits], now); len(u.queues) != MaxNotifiedUnits {
		t.Fatalf("%d units named of %d", len(u.queues), MaxNotifiedUnits)
	}
	if queues, u := dueQueues(many, now); len(u.queues) != 0 || !slices.Equal(queues, []string{"q"}) {
		t.Fatalf("a batch of %d units named %d of them and woke %v; want none, and q woken", len(many), len(u.queues), queues)
	}
}

// A unit notification names the queue, the tenant and the fairness key,
// which is last and may hold tabs; other payloads are refused.
func TestParseUnitNotification(t *testing.T) {
	t.Parallel()
	q, u, ok := ParseUnitNotification("q\tacme\tkey\twith\ttabs")
	if !ok || q != "q" || u != (Unit{Tenant: "acme", FairnessKey: "key\twith\ttabs"}) {
		t.Fatalf("got %q %+v %v", q, u, ok)
	}
	if q, u, ok := ParseUnitNotification("q\t\t"); !ok || q != "q" || u != (Unit{}) {
		t.Fatalf("default tenant, no key: got %q %+v %v", q, u, ok)
	}
	for _, bad := range []string{"", "q", "q\tacme", "\tacme\tk"} {
		if _, _, ok := ParseUnitNotification(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}
