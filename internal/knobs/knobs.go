// Package knobs holds testing aids that change how a node behaves in ways
// no user should choose, so they stay out of every public Config. Tests
// in this module (and internal/testnode's child processes) set them; a
// production binary never does.
package knobs

import "sync"

var fenceOnly sync.Map // node ID -> struct{}

// SetTrustFenceOnly makes the node with this ID, once it leads, ignore its
// local view of its etcd session (the trust window and the session
// ending) and step down only when the PostgreSQL fence refuses a write.
// Correctness never depends on the local view, so this only delays
// stepping down; tests use it to show that the fence alone holds. It is
// read when the node's cluster is created.
func SetTrustFenceOnly(node string, on bool) {
	if on {
		fenceOnly.Store(node, struct{}{})
	} else {
		fenceOnly.Delete(node)
	}
}

// TrustFenceOnly reports whether SetTrustFenceOnly is on for node.
func TrustFenceOnly(node string) bool {
	_, ok := fenceOnly.Load(node)
	return ok
}
