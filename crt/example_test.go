package crt_test

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// A reconciler of a controller-runtime manager that collects the expired
// claims of its namespace: lifecycle takes the manager's client for writes
// and cached reads, and its API reader for the reads it needs fresh.
func Example_lifecycle() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	m, err := lifecycle.New(lifecycle.Config{
		Client:     crt.LifecycleClient(mgr.GetClient(), mgr.GetAPIReader()),
		Recorder:   crt.Events(mgr.GetEventRecorder("claim-collector")),
		DefaultTTL: 7 * 24 * time.Hour,
	})
	if err != nil {
		panic(err)
	}
	collect := func(ctx context.Context, namespace string) (ctrl.Result, error) {
		res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: lifecycle.Scope{
			Namespace: namespace,
			Claims:    crt.ClaimCache(mgr.GetClient()),
			Pods:      crt.PodCache(mgr.GetClient()),
		}})
		return ctrl.Result{RequeueAfter: res.RequeueAfter}, crt.Terminal(err)
	}
	_ = collect // called from the reconciler's Reconcile
}
