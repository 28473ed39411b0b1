package crt

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// ChainObject is what a subreconcile chain run by Reconciler works on: a
// controller-runtime object that is also a subreconcile.Object (a pointer to
// a generated API type has both).
type ChainObject[T any] interface {
	client.Object
	subreconcile.Object[T]
}

// Reconciler runs a subreconcile chain as a controller-runtime
// reconcile.Reconciler: it reads the object with Client, runs Runner on it,
// writes its status back when a step changed it, and maps the outcome to
// what controller-runtime expects:
//
//   - an object that is gone: no requeue;
//   - a requeue: Result.RequeueAfter;
//   - an error Terminal treats as terminal (subreconcile.ErrTerminal among
//     them): a reconcile.TerminalError, never retried until the object
//     changes;
//   - any other error: returned, for the controller's rate-limited retry;
//   - a status write that conflicts (the cache was behind): a requeue after
//     subreconcile.DefaultConflictDelay, logged at V(1), not an error (see
//     Result).
//
// SetupWithManager adds it to a manager as the controller of New's kind:
//
//	err := crt.Reconciler[*v1.Database, state]{Client: mgr.GetClient(), Runner: runner,
//		New: func() *v1.Database { return new(v1.Database) }}.SetupWithManager(mgr)
type Reconciler[T ChainObject[T], S any] struct {
	// Client is the manager's client (mgr.GetClient()): the object is read
	// from its cache and its status written through it.
	Client client.Client
	// Runner is the chain.
	Runner *subreconcile.Runner[T, S]
	// New returns an empty object of the kind, e.g.
	// func() *v1.Database { return new(v1.Database) }.
	New func() T
	// Watch, if set, adds to the controller's builder the watches it needs
	// besides the kind's own (b.Owns(&corev1.ConfigMap{}), a
	// claims.Sets' Watch).
	Watch func(b *builder.Builder) *builder.Builder
}

// SetupWithManager adds r to mgr as the controller of New's kind (For),
// with the watches Watch adds.
func (r Reconciler[T, S]) SetupWithManager(mgr manager.Manager) error {
	b := builder.ControllerManagedBy(mgr).For(r.New())
	if r.Watch != nil {
		b = r.Watch(b)
	}
	return b.Complete(r)
}

// Reconcile runs the chain on the object req names.
func (r Reconciler[T, S]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	before := obj.DeepCopy()
	out := r.Runner.Run(ctx, obj)
	if !equality.Semantic.DeepEqual(before, obj) {
		if err := r.Client.Status().Update(ctx, obj); err != nil {
			if IsStale(err) || (!apierrors.IsNotFound(err) && out.Err == nil) {
				return Result(ctx, 0, err)
			}
		}
	}
	after, err := out.Result()
	return Result(ctx, after, err)
}

var _ reconcile.Reconciler = Reconciler[*corev1.Pod, struct{}]{}
