package main

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/crt/locks"
	"github.com/groundskeeper-io/groundskeeper/examples/minidb/api"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
	"github.com/groundskeeper-io/groundskeeper/locking/lockstep"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// lockStates gives each loop the global lock, kept in a ConfigMap.
func lockStates(mgr manager.Manager, o Options) (func(context.Context, *api.MiniDB) (*lockstep.State, error), error) {
	ns := o.LockNamespace
	if ns == "" {
		ns = "default"
	}
	backend, err := kubelock.New(kubelock.Config{Client: locks.ConfigMaps(mgr.GetClient(), mgr.GetAPIReader()),
		Namespace: ns, Name: "minidb-lock"})
	return lockstep.NewStates[*api.MiniDB](locking.Config{Backend: backend, LockID: o.LockID}, nil), err
}

// reconfigureStep applies spec.config, only while the global lock is ours.
func reconfigureStep() subreconcile.Named[*api.MiniDB, *lockstep.State] {
	return lockstep.Global[*api.MiniDB, *lockstep.State]("Reconfigure",
		func(db *api.MiniDB) bool { return db.Spec.Config != db.Status.AppliedConfig },
		func(ctx context.Context, db *api.MiniDB, _ locking.Lease) (string, error) {
			db.Status.AppliedConfig = db.Spec.Config // the made-up database reconfigures at once
			return "applied config " + db.Spec.Config, nil
		}, nil)
}
