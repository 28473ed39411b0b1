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

	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/crt/backups"
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
	recorder := crt.Events(mgr.GetEventRecorder("aerospike-gc"))
	bc, err := collect.New(backupConfig(collect.Config[*api.AerospikeNamespaceBackup]{
		Objects: backups.Objects[*api.AerospikeNamespaceBackup](mgr.GetClient(), mgr.GetAPIReader()),
		Secrets: crt.Secrets(mgr.GetAPIReader()), Recorder: recorder, Clock: clk, DryRun: o.dryRun, RetryAfter: o.retryAfter,
	}))
	if err != nil {
		return err
	}
	scope := lifecycle.Scope{Namespace: o.namespace, Selector: selector,
		Claims: crt.ClaimCache(mgr.GetClient()), Pods: crt.PodCache(mgr.GetClient())}
	unmounts := crt.UnmountTracking{Lifecycle: lc, Claims: claims, Scope: scope, DryRun: o.dryRun}
	c := &collector{namespace: o.namespace, backups: bc, lifecycle: lc, unmounts: unmounts, claimScope: scope, recorder: recorder, dryRun: o.dryRun}

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
		WithOptions(controller.Options{NewQueue: backups.QueueOn(clk)}).
		Complete(reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
			rep, err := c.pass(ctx)
			logReport(ctx, rep, o.dryRun)
			if onPass != nil {
				onPass(rep)
			}
			return crt.Result(ctx, rep.RequeueAfter, err)
		}))
	if err != nil {
		return err
	}
	// Marks a claim unmounted when the pods that mounted it are gone.
	return crt.TrackUnmounts(mgr, "aerospike-gc-unmount", unmounts)
}

// logReport logs what a pass did.
func logReport(ctx context.Context, rep report, dryRun bool) {
	log := logf.FromContext(ctx).WithValues("dryRun", dryRun)
	for _, o := range rep.Backups {
		log.V(1).Info("backup", "name", o.Name, "deleted", o.Deleted, "reason", o.Reason, "message", o.Message)
	}
	for _, d := range rep.Claims.Deleted {
		log.Info("claim collected", "claim", d.Claim, "reason", d.Reason)
	}
	for _, s := range rep.Claims.Skipped {
		log.Info("expired claim kept", "claim", s.Claim, "reason", s.Reason, "detail", s.Detail)
	}
}
