package locks_test

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/groundskeeper-io/groundskeeper/crt/locks"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
)

// The global operator lock in a ConfigMap, read through the API reader
// (every transaction starts from a read of the API server) and written
// through the manager's client.
func ExampleConfigMaps() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	backend, err := kubelock.New(kubelock.Config{
		Client:    locks.ConfigMaps(mgr.GetClient(), mgr.GetAPIReader()),
		Namespace: "databases",
		Name:      "my-operator-lock",
	})
	if err != nil {
		panic(err)
	}
	lock, err := locking.New(locking.Config{Backend: backend, LockID: "dc1"})
	if err != nil {
		panic(err)
	}
	_ = lock // lock.Take(ctx) in the global steps of a reconcile
}
