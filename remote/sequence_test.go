package remote_test

import (
	"context"
	"testing"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/remote"
)

// A remote worker claims only a sequence's head: the held jobs after it
// are not claimable, whatever the claim's size; the head's completion,
// failure or snooze over HTTP moves the turn as a node's would, and a
// snooze keeps it (the job is pending again, still the head).
func TestRemoteClaimsTakeOnlyASequencesTurn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := e.newWorkers(remote.Config{})
	w := e.register(r, remote.Registration{Tenant: "acme", Queues: []string{"default"}})
	var ids []int64
	for range 4 {
		ids = append(ids, e.enqueue(job.Request{Kind: "k", Tenant: "acme", MaxAttempts: 1,
			Sequence: &job.Sequence{Key: "s", OnFailure: job.SequenceContinue}}).ID)
	}
	next := func(want int64) remote.ClaimedJob {
		t.Helper()
		got := e.claim(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 10})
		if len(got) != 1 || got[0].ID != want {
			t.Fatalf("claimed %+v, want only job %d", got, want)
		}
		return got[0]
	}
	first := next(ids[0])
	if st, err := r.Snooze(ctx, "acme", first.Lease, 0); err != nil || st != job.Pending {
		t.Fatalf("snooze: %s %v", st, err)
	}
	first = next(ids[0]) // snoozed: still the head
	if res, err := r.Complete(ctx, "acme", []remote.Completion{{Lease: first.Lease}}); err != nil || res[0].Err != nil {
		t.Fatalf("complete: %v %+v", err, res)
	}
	second := next(ids[1])
	if st, err := r.Fail(ctx, "acme", remote.Failure{Lease: second.Lease, Message: "no"}); err != nil || st != job.Failed {
		t.Fatalf("fail: %s %v", st, err)
	}
	next(ids[2]) // on_failure continue
	if got := e.claim(r, remote.Claim{Tenant: "acme", Worker: w.ID, Max: 10}); len(got) != 0 {
		t.Fatalf("claimed %+v while job %d holds the turn", got, ids[2])
	}
}
