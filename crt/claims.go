package crt

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// ClaimCollection is what CollectClaims needs: unmount tracking, and what
// the collection pass adds to it.
type ClaimCollection struct {
	UnmountTracking
	// Recorder receives a Normal ClaimCollected event on each deleted
	// claim; nil records none.
	Recorder lifecycle.EventRecorder
	// Clock is the clock of the pass controller's queue, whose delayed
	// requeues then follow the Lifecycle Manager's clock (a fake one in
	// tests); default the real clock.
	Clock clock.WithTicker
	// OnPass, if set, is called with the result of every pass and the
	// instant on Clock it started at.
	OnPass func(start time.Time, res lifecycle.CollectResult)
}

// CollectClaims adds to mgr the collection of claims by their unmount TTL
// (lifecycle's pvc-ttl and last-unmounted-on annotations): TrackUnmounts,
// as the controller name+"-unmount", and a controller named name that runs
// lifecycle.Manager.Collect over the namespace of any claim or pod that
// comes or goes (one request per namespace, so passes of a namespace never
// overlap), requeued when the next claim expires. Collect decides on a
// fresh pod list and deletes with UID and resourceVersion preconditions; a
// dry run (UnmountTracking.DryRun) deletes and marks nothing.
func CollectClaims(mgr manager.Manager, name string, c ClaimCollection) error {
	clk := c.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	toPass := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace()}}}
	})
	// A pod's volumes cannot change: only its creation and deletion matter.
	podComesOrGoes := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	err := builder.ControllerManagedBy(mgr).Named(name).
		Watches(&corev1.PersistentVolumeClaim{}, toPass).
		Watches(&corev1.Pod{}, toPass, builder.WithPredicates(podComesOrGoes)).
		WithOptions(controller.Options{NewQueue: QueueOn(clk)}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return c.pass(ctx, req, clk.Now())
		}))
	if err != nil {
		return err
	}
	return TrackUnmounts(mgr, name+"-unmount", c.UnmountTracking)
}

func (c ClaimCollection) pass(ctx context.Context, req reconcile.Request, start time.Time) (reconcile.Result, error) {
	if c.Scope.Namespace != "" && req.Namespace != c.Scope.Namespace {
		return reconcile.Result{}, nil
	}
	scope := c.Scope
	scope.Namespace = req.Namespace
	res, err := c.Lifecycle.Collect(ctx, lifecycle.CollectOptions{Scope: scope, DryRun: c.DryRun})
	log := logf.FromContext(ctx).WithValues("dryRun", c.DryRun)
	for _, d := range res.Deleted {
		log.Info("claim collected", "claim", d.Claim, "reason", d.Reason)
		if c.Recorder != nil && !c.DryRun {
			c.Recorder.Event(&corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim",
				Namespace: req.Namespace, Name: d.Claim, UID: d.UID}, corev1.EventTypeNormal, lifecycle.ReasonClaimCollected, d.Reason)
		}
	}
	for _, s := range res.Skipped {
		log.Info("expired claim kept", "claim", s.Claim, "reason", s.Reason, "detail", s.Detail)
	}
	if c.OnPass != nil {
		c.OnPass(start, res)
	}
	return Result(ctx, res.RequeueAfter, err)
}

// QueueOn returns a controller queue whose delayed requeues follow clk, so
// that a test that steps a fake clock past a deadline sees the reconcile
// the last one asked for. With the real clock it is controller-runtime's
// classic rate-limited queue.
func QueueOn(clk clock.WithTicker) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(rl,
			workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name, Clock: clk})
	}
}
