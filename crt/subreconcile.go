package crt

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
// reconcile.Reconciler: it reads the object with c (the manager's client),
// runs runner on it, writes its status back when a step changed it, and
// maps the outcome to what controller-runtime expects. newObj returns an
// empty object of the kind, e.g. func() *v1.Database { return new(v1.Database) }.
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
func Reconciler[T ChainObject[T], S any](c client.Client, runner *subreconcile.Runner[T, S], newObj func() T) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		obj := newObj()
		if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		before := obj.DeepCopy()
		out := runner.Run(ctx, obj)
		if !equality.Semantic.DeepEqual(before, obj) {
			if err := c.Status().Update(ctx, obj); err != nil {
				if IsStale(err) || (!apierrors.IsNotFound(err) && out.Err == nil) {
					return Result(ctx, 0, err)
				}
			}
		}
		after, err := out.Result()
		return Result(ctx, after, err)
	})
}
