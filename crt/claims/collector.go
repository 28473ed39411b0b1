package claims

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// Collector collects claims by their unmount TTL (lifecycle's pvc-ttl
// and last-unmounted-on annotations) on a manager: SetupWithManager adds
// its UnmountTracker, and a controller that runs lifecycle.Manager.Collect
// over the namespace of any claim or pod that comes or goes (one request
// per namespace, so passes of a namespace never overlap), requeued when the
// next claim expires. Collect decides on a fresh pod list and deletes with
// UID and resourceVersion preconditions; a dry run
// (UnmountTracker.DryRun) deletes and marks nothing.
type Collector struct {
	UnmountTracker
	// Name names the collection's controller (default "claims"); its
	// UnmountTracker is named Name+"-unmount" unless UnmountTracker.Name is
	// set. Controller names are unique in a manager.
	Name string
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

// SetupWithManager adds to mgr the collection's controller and its
// UnmountTracker's.
func (c Collector) SetupWithManager(mgr manager.Manager) error {
	name := c.Name
	if name == "" {
		name = "claims"
	}
	// Checked before the first controller is added: a refused tracker
	// leaves nothing half set up on mgr.
	t := c.UnmountTracker
	if t.Name == "" {
		t.Name = name + "-unmount"
	}
	if err := t.check(t.Name); err != nil {
		return err
	}
	toPass := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace()}}}
	})
	// A pod's volumes cannot change: only its creation and deletion matter.
	podComesOrGoes := predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}
	err := builder.ControllerManagedBy(mgr).Named(name).
		Watches(&corev1.PersistentVolumeClaim{}, toPass).
		Watches(&corev1.Pod{}, toPass, builder.WithPredicates(podComesOrGoes)).
		WithOptions(controller.Options{NewQueue: crt.QueueOn(c.clock())}).
		Complete(c)
	if err != nil {
		return err
	}
	return t.SetupWithManager(mgr)
}

func (c Collector) clock() clock.WithTicker {
	if c.Clock == nil {
		return clock.RealClock{}
	}
	return c.Clock
}

// Reconcile runs one collection pass over the namespace of req (a request
// without a name).
func (c Collector) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return c.pass(ctx, req, c.clock().Now())
}

func (c Collector) pass(ctx context.Context, req reconcile.Request, start time.Time) (reconcile.Result, error) {
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
	return crt.Result(ctx, res.RequeueAfter, err)
}
