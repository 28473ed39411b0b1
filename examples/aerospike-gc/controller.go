package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/examples/aerospike-gc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// controllerOptions are the flags of the real controller.
type controllerOptions struct {
	namespace     string
	dryRun        bool
	retryAfter    time.Duration
	claimSelector string
}

// scheme holds the types the manager's client reads: Kubernetes' own and
// the backups.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(api.AddToScheme(scheme))
}

// setupCollector adds the collector's two controllers to mgr:
//
//   - "aerospike-gc" runs the collection pass over the whole namespace. Any
//     change to a backup, a claim or a pod may change what is expired, or
//     when, so every event maps to the one request of the namespace; the
//     pass asks to be requeued when the next backup or claim expires.
//   - "aerospike-gc-unmount" marks a claim unmounted when a pod that
//     mounted it is deleted (aerospike-operator's last-unmounted-on).
//
// clk is what the collector takes for now, in its decisions, its
// annotations and its requeues: the real clock in a cluster, a fake one in
// the e2e tests, which step it days ahead. onPass, if set, is called with
// the report of every pass.
func setupCollector(mgr ctrl.Manager, o controllerOptions, clk clock.WithTicker, onPass func(report)) error {
	selector, err := labels.Parse(o.claimSelector)
	if err != nil {
		return fmt.Errorf("--claim-selector %q: %w", o.claimSelector, err)
	}
	// Writes and cached reads through the manager's client; the reads that
	// must be fresh (a claim before its read-modify-write, pods before a
	// deletion) through its API reader.
	claims := crt.LifecycleClient(mgr.GetClient(), mgr.GetAPIReader())
	lc, err := lifecycle.New(lifecycle.Config{
		Client:      claims,
		Clock:       clk,
		Annotations: lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix},
	})
	if err != nil {
		return err
	}
	c := &collector{
		namespace: o.namespace,
		backups:   clusterBackups{client: mgr.GetClient(), live: mgr.GetAPIReader()},
		secrets:   crt.Secrets(mgr.GetAPIReader()),
		claims:    claims,
		open:      openBucket,
		lifecycle: lc,
		claimScope: lifecycle.Scope{Namespace: o.namespace, Selector: selector,
			Claims: crt.ClaimCache(mgr.GetClient()), Pods: crt.PodCache(mgr.GetClient())},
		recorder:   crt.Events(mgr.GetEventRecorder("aerospike-gc")),
		clock:      clk,
		dryRun:     o.dryRun,
		retryAfter: o.retryAfter,
		notBefore:  map[types.UID]time.Time{},
	}

	pass := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.namespace, Name: "collection-pass"}}
	toPass := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{pass}
	})
	// A pod's volumes cannot change: only its creation and deletion matter.
	podComesOrGoes := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	err = ctrl.NewControllerManagedBy(mgr).Named("aerospike-gc").
		Watches(&api.AerospikeNamespaceBackup{}, toPass).
		Watches(&corev1.PersistentVolumeClaim{}, toPass).
		Watches(&corev1.Pod{}, toPass, builder.WithPredicates(podComesOrGoes)).
		WithOptions(controller.Options{NewQueue: queueOn(clk)}).
		Complete(&passReconciler{c: c, onPass: onPass})
	if err != nil {
		return err
	}
	// The unmount controller works on levels, not only on events: a pod
	// deleted while no replica led, or before this one started, sends it no
	// event. Every tracked claim without a mark is checked when the claim
	// is seen, the informer's first list included.
	return ctrl.NewControllerManagedBy(mgr).Named("aerospike-gc-unmount").
		Watches(&corev1.Pod{}, handler.Funcs{DeleteFunc: enqueueClaimsOf}).
		Watches(&corev1.PersistentVolumeClaim{}, &handler.EnqueueRequestForObject{},
			builder.WithPredicates(predicate.NewPredicateFuncs(c.trackedUnmarked))).
		Complete(reconcile.Func(c.reconcileUnmount))
}

// trackedUnmarked reports whether obj is a claim a pod is recorded to
// mount (pod-name) that carries no unmount mark and is not being deleted.
func (c *collector) trackedUnmarked(obj client.Object) bool {
	ann := c.lifecycle.Annotations()
	a := obj.GetAnnotations()
	_, marked := a[ann.LastUnmountedKey()]
	return a[ann.PodNameKey()] != "" && !marked && obj.GetDeletionTimestamp() == nil
}

// queueOn returns a controller queue whose delayed requeues follow clk, so
// that a test that steps a fake clock past a TTL sees the pass that the
// last one asked for. In a cluster clk is the real clock, and this is
// controller-runtime's classic rate-limited queue.
func queueOn(clk clock.WithTicker) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(rl,
			workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name, Clock: clk})
	}
}

// passReconciler runs one collection pass over the namespace per request.
type passReconciler struct {
	c      *collector
	onPass func(report)
}

func (r *passReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx).WithValues("dryRun", r.c.dryRun)
	rep, err := r.c.pass(ctx)
	for _, o := range rep.Backups {
		log.V(1).Info("backup", "name", o.Backup, "deleted", o.Deleted, "reason", o.Reason, "message", o.Message)
	}
	for _, d := range rep.Claims.Deleted {
		log.Info("claim collected", "claim", d.Claim, "reason", d.Reason)
	}
	for _, s := range rep.Claims.Skipped {
		log.Info("expired claim kept", "claim", s.Claim, "reason", s.Reason, "detail", s.Detail)
	}
	if r.onPass != nil {
		r.onPass(rep)
	}
	return crt.Result(ctx, rep.RequeueAfter, err)
}

// enqueueClaimsOf asks to mark unmounted each claim that a deleted pod
// mounted. The event may come late (or be a deletion the informer only
// inferred): markUnmounted decides on fresh reads, not on the event.
func enqueueClaimsOf(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	pod, ok := e.Object.(*corev1.Pod)
	if !ok {
		return
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: pod.Namespace, Name: v.PersistentVolumeClaim.ClaimName}})
		}
	}
}

// reconcileUnmount marks the claim of the request unmounted if no pod
// mounts it any more. A claim that a pod in the cache mounts is left
// without a read of the API server: when that pod goes, its deletion
// brings the claim back here.
func (c *collector) reconcileUnmount(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pods, err := c.claimScope.Pods.ListPods(ctx, req.Namespace, labels.Everything())
	if err != nil {
		return crt.Result(ctx, 0, err)
	}
	for _, p := range pods {
		if mounts(p, req.Name) {
			return reconcile.Result{}, nil
		}
	}
	marked, err := c.markUnmounted(ctx, req.Name)
	if marked {
		logf.FromContext(ctx).Info("claim unmounted", "claim", req.Name, "dryRun", c.dryRun)
	}
	return crt.Result(ctx, 0, err)
}

// clusterBackups reads backups from the manager's cache (List) and, where
// the collector decides on them, from the API server (Get).
type clusterBackups struct {
	client client.Client // the manager's: cached reads and writes
	live   client.Reader // the manager's API reader
}

func (b clusterBackups) List(ctx context.Context, namespace string) ([]*api.AerospikeNamespaceBackup, error) {
	var list api.AerospikeNamespaceBackupList
	if err := b.client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := make([]*api.AerospikeNamespaceBackup, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (b clusterBackups) Get(ctx context.Context, namespace, name string) (*api.AerospikeNamespaceBackup, error) {
	var backup api.AerospikeNamespaceBackup
	if err := b.live.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &backup); err != nil {
		return nil, err
	}
	return &backup, nil
}

func (b clusterBackups) UpdateStatus(ctx context.Context, backup *api.AerospikeNamespaceBackup) error {
	return b.client.Status().Update(ctx, backup)
}

func (b clusterBackups) Delete(ctx context.Context, namespace, name string, uid types.UID, resourceVersion string) error {
	backup := &api.AerospikeNamespaceBackup{}
	backup.Namespace, backup.Name = namespace, name
	return b.client.Delete(ctx, backup, client.Preconditions{UID: &uid, ResourceVersion: &resourceVersion})
}

// mounts reports whether pod has a volume for the claim named claim.
func mounts(pod *corev1.Pod, claim string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
			return true
		}
	}
	return false
}
