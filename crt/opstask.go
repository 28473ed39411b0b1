package crt

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// EveryReplica returns run as a manager Runnable that the manager starts on
// every replica, leader or not (NeedLeaderElection is false): for an opstask
// Controller's Run, which is built to run on every replica at once (claims
// with leases decide which one executes a task), so that tasks wait for no
// election. A Runnable added with mgr.Add and no such method runs on the
// leader only.
func EveryReplica(run func(ctx context.Context) error) manager.Runnable { return everyReplica(run) }

type everyReplica func(ctx context.Context) error

func (r everyReplica) Start(ctx context.Context) error { return r(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

var _ manager.LeaderElectionRunnable = everyReplica(nil)

// TaskStore returns store (a kubestore.Store, say) with its change
// notifications taken from the manager's informer on obj's kind instead of a
// watch of its own; everything else (the consistent List the controller
// claims on, UpdateStatus, SetHeld, Delete) still goes to store. obj names
// the task kind: a typed object registered in the manager's scheme, or an
// unstructured.Unstructured with its GroupVersionKind set. Pass the result as
// opstask.Config.Store.
func TaskStore(store opstask.Store, informers cache.Informers, obj client.Object) opstask.Store {
	return taskStore{Store: store, informers: informers, obj: obj}
}

type taskStore struct {
	opstask.Store
	informers cache.Informers
	obj       client.Object
}

var _ opstask.Watcher = taskStore{}

// Watch calls notify on every event of the manager's informer until ctx is
// done.
func (s taskStore) Watch(ctx context.Context, notify func()) error {
	inf, err := s.informers.GetInformer(ctx, s.obj)
	if err != nil {
		return fmt.Errorf("crt: informer for tasks: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	})
	if err != nil {
		return fmt.Errorf("crt: watch tasks: %w", err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	<-ctx.Done()
	return ctx.Err()
}
