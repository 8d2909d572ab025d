package job

import (
	"fmt"
	"testing"

	"github.com/gafferhq/gaffer/store"
)

// A notified unit waits for a side claim only while the claim loop is
// busy, only if its last claim did not serve the unit, and at most
// maxSideUnits of them; a claim that serves a waiting unit takes it off.
func TestSideClaimBookkeeping(t *testing.T) {
	t.Parallel()
	s := sideClaims{wake: make(chan struct{}, 1)}
	a, b := store.Unit{Tenant: "a"}, store.Unit{Tenant: "b", FairnessKey: "k"}
	all := func(int) bool { return true }

	s.notified(b)
	if got := s.take(all); got != nil {
		t.Fatalf("idle loop: %v waiting, want none (the queue's wake claims it)", got)
	}
	s.filling.Store(true)
	s.served([]store.Job{{Tenant: "a"}})
	s.notified(a)
	if got := s.take(all); got != nil {
		t.Fatalf("a served by the last claim: %v waiting, want none", got)
	}
	s.notified(b)
	s.notified(b)
	if !s.pending.Load() || len(s.wake) != 1 {
		t.Fatal("b notified: no side claim asked for")
	}
	if got := s.take(func(int) bool { return false }); got != nil || !s.pending.Load() {
		t.Fatalf("no free slot: took %v; want b kept waiting", got)
	}
	if got := s.take(all); len(got) != 1 || got[0] != b || s.pending.Load() {
		t.Fatalf("took %v, want [b] and nothing left", got)
	}
	s.notified(b)
	s.served([]store.Job{{Tenant: "b", FairnessKey: "k"}})
	if s.pending.Load() {
		t.Fatal("b still waits for a side claim after a claim of the queue served it")
	}
	for i := range maxSideUnits + 5 {
		s.notified(store.Unit{Tenant: fmt.Sprint("t", i)})
	}
	if got := s.take(all); len(got) != maxSideUnits {
		t.Fatalf("%d units waiting, want at most %d", len(got), maxSideUnits)
	}
}
