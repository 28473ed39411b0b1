package crt

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// Result maps what a reconcile ended with to what controller-runtime
// expects, so that a controller stays quiet about what is no fault:
//
//   - err nil: Result.RequeueAfter is requeueAfter (zero: none);
//   - a conflict or an AlreadyExists from the API server (IsStale): the
//     manager's cache was behind the API server. The watch brings the newer
//     object and reconciles again; as a backstop Result requeues after
//     subreconcile.DefaultConflictDelay, or after requeueAfter when that is
//     sooner. It logs at V(1), never as an error;
//   - the global lock held by another instance (a *locking.HeldError wrapping
//     locking.ErrLocked, as Lock.Take and Lock.Do return): a requeue after
//     HeldError.RequeueAfter, when the holder's lock runs out unless it is
//     extended, or after requeueAfter when that is sooner. It logs at V(1);
//   - an error Terminal treats as terminal: a reconcile.TerminalError, not
//     retried until the object changes;
//   - any other error: returned, for the controller's rate-limited retry
//     (controller-runtime ignores RequeueAfter beside an error: the retry
//     runs the reconcile again, which returns the requeue it then needs).
//
// A join (errors.Join, fmt.Errorf with several %w, as lifecycle.SyncOwner
// and Collect return) is a quiet requeue, or terminal, only when every one
// of its parts is; a join with any other part is an ordinary error, logged
// and retried.
//
// A typical Reconcile ends with:
//
//	return crt.Result(ctx, next, err)
func Result(ctx context.Context, requeueAfter time.Duration, err error) (reconcile.Result, error) {
	switch {
	case err == nil:
		return reconcile.Result{RequeueAfter: requeueAfter}, nil
	case IsStale(err):
		logr.FromContextOrDiscard(ctx).V(1).Info("the cache was behind the API server; requeue", "error", err.Error())
		after := subreconcile.DefaultConflictDelay
		if requeueAfter > 0 && requeueAfter < after {
			after = requeueAfter
		}
		return reconcile.Result{RequeueAfter: after}, nil
	case every(err, lockHeldHere):
		var held *locking.HeldError
		errors.As(err, &held)
		logr.FromContextOrDiscard(ctx).V(1).Info("the global lock is held by another instance; requeue",
			"holder", held.Holder, "end", held.End, "requeueAfter", held.RequeueAfter)
		after := held.RequeueAfter
		if after <= 0 {
			after = time.Second // the lock record's precision
		}
		if requeueAfter > 0 && requeueAfter < after {
			after = requeueAfter
		}
		return reconcile.Result{RequeueAfter: after}, nil
	default:
		return reconcile.Result{}, Terminal(err)
	}
}

// lockHeldHere reports whether err itself is the lock's "held by another
// instance".
func lockHeldHere(err error) bool {
	held, ok := err.(*locking.HeldError)
	return ok && errors.Is(held, locking.ErrLocked)
}

// IsStale reports whether err is what a write based on a stale read gets
// from the API server: a conflict (the object changed since it was read)
// or AlreadyExists (an object the cache did not show yet). Wrapped errors
// count; a join is stale only when every one of its parts is; a "do not
// retry" error never is.
func IsStale(err error) bool {
	return every(err, staleHere) && !IsTerminal(err)
}

// staleHere reports whether err itself, not what it wraps, is the API
// server's conflict or AlreadyExists.
func staleHere(err error) bool {
	if _, ok := err.(apierrors.APIStatus); !ok {
		return false
	}
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}
