package claims_test

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/crt/claims"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// A reconciler of a controller-runtime manager that collects the expired
// claims of its namespace: lifecycle takes the manager's client for writes
// and cached reads, and its API reader for the reads it needs fresh.
func ExampleClient() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	m, err := lifecycle.New(lifecycle.Config{
		Client:     claims.Client(mgr.GetClient(), mgr.GetAPIReader()),
		Recorder:   crt.Events(mgr.GetEventRecorder("claim-collector")),
		DefaultTTL: 7 * 24 * time.Hour,
	})
	if err != nil {
		panic(err)
	}
	collect := func(ctx context.Context, namespace string) (ctrl.Result, error) {
		res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: lifecycle.Scope{
			Namespace: namespace,
			Claims:    claims.Cache(mgr.GetClient()),
			Pods:      claims.PodCache(mgr.GetClient()),
		}})
		return crt.Result(ctx, res.RequeueAfter, err)
	}
	_ = collect // called from the reconciler's Reconcile
}

// The same collection with no reconciler of your own: a Collector marks
// claims unmounted when their pods are gone and collects them once their
// TTL has passed since, passing over a namespace whenever a claim or a pod
// of it comes or goes.
func ExampleCollector() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	client := claims.Client(mgr.GetClient(), mgr.GetAPIReader())
	recorder := crt.Events(mgr.GetEventRecorder("claim-collector"))
	m, err := lifecycle.New(lifecycle.Config{Client: client, Recorder: recorder, DefaultTTL: 7 * 24 * time.Hour})
	if err != nil {
		panic(err)
	}
	scope := lifecycle.Scope{Namespace: "databases",
		Claims: claims.Cache(mgr.GetClient()), Pods: claims.PodCache(mgr.GetClient())}
	err = claims.Collector{
		UnmountTracker: claims.UnmountTracker{Lifecycle: m, Claims: client, Scope: scope},
		Name:           "claims",
		Recorder:       recorder,
	}.SetupWithManager(mgr)
	if err != nil {
		panic(err)
	}
	// mgr.Start(ctx) runs it.
}
