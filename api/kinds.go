package api

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gafferhq/gaffer/store"
)

// CodeUnknownKind (400): no node handles the kind and no remote worker
// the tenant's jobs may go to works it, so the job would wait, or be
// retried and dead-lettered, for nothing. The request may ask for it
// anyway with allow_unknown_kind; the operator may turn the check off
// (Config.AllowUnknownKinds).
const CodeUnknownKind = "unknown_kind"

// knownKinds answers whether a kind is registered for a tenant (see
// store.KindRegistered). A yes is remembered for knownKindTTL, so a
// steady stream of enqueues asks the database once a TTL per kind; a no
// is asked again every time, so a worker that registers a moment later
// is seen at once. The memory is bounded: past knownKindMax answers it
// starts over.
type knownKinds struct {
	store *store.Store
	now   func() time.Time

	mu  sync.Mutex
	yes map[tenantKind]time.Time // when each answer was read
}

type tenantKind struct{ tenant, kind string }

const (
	knownKindTTL = 30 * time.Second
	knownKindMax = 4096
)

func newKnownKinds(st *store.Store) *knownKinds {
	return &knownKinds{store: st, now: time.Now, yes: map[tenantKind]time.Time{}}
}

// registered reports whether kind may be enqueued for tenant, asking
// through q (the request's transaction: it must not wait for a second
// connection of the pool while it holds one).
func (k *knownKinds) registered(ctx context.Context, q store.DB, tenant, kind string) (bool, error) {
	key := tenantKind{tenant, kind}
	now := k.now()
	k.mu.Lock()
	at, ok := k.yes[key]
	k.mu.Unlock()
	if ok && now.Sub(at) < knownKindTTL {
		return true, nil
	}
	found, err := k.store.KindRegistered(ctx, q, tenant, kind)
	if err != nil || !found {
		return false, err
	}
	k.mu.Lock()
	if len(k.yes) >= knownKindMax {
		clear(k.yes)
	}
	k.yes[key] = now
	k.mu.Unlock()
	return true, nil
}

// unknownKind is the problem for a kind nobody registered.
func unknownKind(tenant, kind string) *Problem {
	p := problem(CodeUnknownKind, fmt.Sprintf("kind %q: no node handles it and no remote worker of tenant %q works it "+
		"(none registered it in the dead-node retention): the job would never run. Check the spelling, start a worker for it, "+
		`or send "allow_unknown_kind": true to enqueue it anyway`, clipText(kind, 100), clipText(tenant, 100)))
	p.Field = "kind"
	return p
}
