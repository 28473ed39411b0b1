package claims

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// UnmountTracker marks a claim unmounted (lifecycle's last-unmounted-on)
// when the pods that mounted it are gone, for lifecycle.Manager.Collect to
// delete it once its TTL has passed since. SetupWithManager adds it to a
// manager as a controller that works on levels, not only on events:
// besides pod deletions, every tracked claim without a mark is looked at
// when it is seen, the informer's first list included, so a pod deleted
// while no replica ran still has its claims marked. It needs the lifecycle
// Manager whose annotations mark claims, a fresh reader of claims, and the
// claims and pods in scope.
type UnmountTracker struct {
	// Name names the controller (default "claims-unmount"). Controller
	// names are unique in a manager.
	Name string
	// Lifecycle marks the claims (Manager.MarkUnmounted, which decides on
	// a fresh pod list). Required.
	Lifecycle *lifecycle.Manager
	// Claims reads a claim from the API server: Client(mgr.GetClient(),
	// mgr.GetAPIReader()). Required.
	Claims interface {
		GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	}
	// Scope: a claim outside Scope.Selector is never marked; Scope.Pods
	// (PodCache(mgr.GetClient())) is the cache a claim's mounts are first
	// looked up in.
	Scope lifecycle.Scope
	// DryRun reports, writes nothing.
	DryRun bool
}

// SetupWithManager adds t to mgr as a controller named t.Name.
func (t UnmountTracker) SetupWithManager(mgr manager.Manager) error {
	name := t.Name
	if name == "" {
		name = "claims-unmount"
	}
	if err := t.check(name); err != nil {
		return err
	}
	ann := t.Lifecycle.Annotations()
	trackedUnmarked := func(obj client.Object) bool {
		a := obj.GetAnnotations()
		_, marked := a[ann.LastUnmountedKey()]
		return a[ann.PodNameKey()] != "" && !marked && obj.GetDeletionTimestamp() == nil
	}
	return builder.ControllerManagedBy(mgr).Named(name).
		Watches(&corev1.Pod{}, handler.Funcs{DeleteFunc: enqueueClaimsOf}).
		Watches(&corev1.PersistentVolumeClaim{}, &handler.EnqueueRequestForObject{},
			builder.WithPredicates(predicate.NewPredicateFuncs(trackedUnmarked))).
		Complete(t)
}

// check refuses a tracker that cannot run, naming the field.
func (t UnmountTracker) check(name string) error {
	switch {
	case t.Lifecycle == nil:
		return fmt.Errorf("crt: claims.UnmountTracker %q: Lifecycle is nil", name)
	case t.Claims == nil:
		return fmt.Errorf("crt: claims.UnmountTracker %q: Claims is nil", name)
	}
	return nil
}

// enqueueClaimsOf enqueues each claim that a deleted pod mounted. The event
// may come late (or be a deletion the informer only inferred): the
// reconcile decides on fresh reads, not on the event.
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

// Reconcile marks the claim of the request unmounted if no pod mounts it
// any more. A claim that a pod in the cache mounts is left without a read
// of the API server: when that pod goes, its deletion brings the claim
// back here.
func (t UnmountTracker) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if t.Scope.Namespace != "" && req.Namespace != t.Scope.Namespace {
		return reconcile.Result{}, nil
	}
	if t.Scope.Pods != nil {
		pods, err := t.Scope.Pods.ListPods(ctx, req.Namespace, labels.Everything())
		if err != nil {
			return crt.Result(ctx, 0, err)
		}
		for _, p := range pods {
			for _, v := range p.Spec.Volumes {
				if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == req.Name {
					return reconcile.Result{}, nil
				}
			}
		}
	}
	marked, err := t.Mark(ctx, req.Namespace, req.Name)
	if marked {
		logf.FromContext(ctx).Info("claim unmounted", "claim", req.Name, "dryRun", t.DryRun)
	}
	return crt.Result(ctx, 0, err)
}

// Mark marks the claim namespace/name unmounted if it is tracked (it
// carries pod-name), in scope and not being deleted, and no pod mounts it
// (lifecycle.Manager.MarkUnmounted decides on a fresh pod list). It reports
// whether the claim is marked (in a dry run: would be).
func (t UnmountTracker) Mark(ctx context.Context, namespace, name string) (bool, error) {
	ann := t.Lifecycle.Annotations()
	claim, err := t.Claims.GetClaim(ctx, namespace, name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	podName := claim.Annotations[ann.PodNameKey()]
	if podName == "" || claim.DeletionTimestamp != nil {
		return false, nil // not tracked, or going
	}
	if sel := t.Scope.Selector; sel != nil && !sel.Matches(labels.Set(claim.Labels)) {
		return false, nil // not one of the claims in scope
	}
	if t.DryRun {
		_, done := claim.Annotations[ann.LastUnmountedKey()]
		return !done, nil
	}
	return t.Lifecycle.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: namespace, Pod: podName, Claim: name})
}
