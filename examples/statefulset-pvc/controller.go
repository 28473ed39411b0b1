package main

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/crt/claims"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/examples/statefulset-pvc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// controllerOptions are the flags of the real controller.
type controllerOptions struct {
	dryRun bool
	resync time.Duration
}

// newManager returns the controller-runtime manager of the command, with
// the ReplicatedSet controller registered. opts adjust the manager's
// options last (tests run two managers in one process).
func newManager(cfg *rest.Config, common *kubecmd.Flags, o controllerOptions, opts ...func(*manager.Options)) (manager.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := api.AddToScheme(scheme); err != nil {
		return nil, err
	}
	// Pods are ours only with our label: the cache holds no others. Claims
	// are cached in the whole namespace, because KEP-1847 applies the
	// policy to any claim with the name a template gives, pre-provisioned
	// ones included.
	ours, err := labels.Parse(api.SetLabel)
	if err != nil {
		return nil, err
	}
	cacheOptions := func(mo *manager.Options) {
		mo.Cache.ByObject = map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: ours}}
		mo.Cache.SyncPeriod = &o.resync
	}
	mgr, err := common.NewManager(cfg, "statefulset-pvc", scheme, append([]func(*manager.Options){cacheOptions}, opts...)...)
	if err != nil {
		return nil, err
	}
	events := mgr.GetEventRecorder("statefulset-pvc")
	m, err := lifecycle.New(lifecycle.Config{Client: claims.Client(mgr.GetClient(), mgr.GetAPIReader()), Recorder: crt.Events(events)})
	if err != nil {
		return nil, err
	}
	r := &reconciler{Client: mgr.GetClient(), m: m, events: events, dryRun: o.dryRun,
		sets: claims.Sets[*api.ReplicatedSet]{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), GVK: api.GroupVersionKind, Spec: specOf, Label: api.SetLabel}}
	return mgr, r.SetupWithManager(mgr)
}

// SetupWithManager adds r to mgr as the controller of ReplicatedSets, which
// also watches their pods, and every claim, for the set of its controller
// reference or its label.
func (r *reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return r.sets.Watch(ctrl.NewControllerManagedBy(mgr).For(&api.ReplicatedSet{})).Complete(r)
}

// Reconcile brings one ReplicatedSet's pods and claims to its spec.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var set api.ReplicatedSet
	if err := r.Get(ctx, req.NamespacedName, &set); err != nil {
		// Deleted: the garbage collector does the rest.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return crt.Result(ctx, 0, r.reconcile(ctx, &set))
}
