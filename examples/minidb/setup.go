package main

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/crt/claims"
	"github.com/groundskeeper-io/groundskeeper/examples/minidb/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/locking/lockstep"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// Scheme holds the types the operator reads.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(api.AddToScheme(Scheme))
}

// Options are the operator's settings.
type Options struct {
	LockID        string // this instance's name in the global lock
	LockNamespace string // where the lock's ConfigMap is; "default" if empty
}

// Setup adds the operator's controllers to mgr.
func Setup(ctx context.Context, mgr manager.Manager, o Options) error {
	if err := setupBackups(mgr); err != nil {
		return err
	}
	if err := setupTasks(ctx, mgr); err != nil {
		return err
	}
	lm, err := lifecycle.New(lifecycle.Config{Client: claims.Client(mgr.GetClient(), mgr.GetAPIReader()),
		Recorder: crt.Events(mgr.GetEventRecorder("minidb"))})
	if err != nil {
		return err
	}
	newState, err := lockStates(mgr, o)
	if err != nil {
		return err
	}
	runner, err := subreconcile.New(subreconcile.Config[*api.MiniDB, *lockstep.State]{
		Name:     "MiniDB",
		Steps:    []subreconcile.Named[*api.MiniDB, *lockstep.State]{claimsStep(mgr, lm), reconfigureStep(), lockstep.Release[*api.MiniDB, *lockstep.State]("ReleaseLock")},
		NewState: newState,
	})
	if err != nil {
		return err
	}
	return crt.Reconciler[*api.MiniDB, *lockstep.State]{Client: mgr.GetClient(), Runner: runner,
		New: func() *api.MiniDB { return new(api.MiniDB) }, Watch: claimSets(mgr).Watch}.SetupWithManager(mgr)
}
