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
// and Collect return) is as strong as its weakest part: a quiet requeue
// when every one of its parts is one (a stale cache, the lock held
// elsewhere, in any mix), at the earliest of their times; terminal when
// every part is terminal; otherwise an ordinary error, logged and retried.
//
// A typical Reconcile ends with:
//
//	return crt.Result(ctx, next, err)
func Result(ctx context.Context, requeueAfter time.Duration, err error) (reconcile.Result, error) {
	if err == nil {
		return reconcile.Result{RequeueAfter: requeueAfter}, nil
	}
	if IsTerminal(err) {
		return reconcile.Result{}, Terminal(err)
	}
	after, ok := quietAfter(err)
	if !ok {
		return reconcile.Result{}, err
	}
	log := logr.FromContextOrDiscard(ctx).V(1)
	if held := (*locking.HeldError)(nil); errors.As(err, &held) && lockHeldHere(held) {
		log = log.WithValues("holder", held.Holder, "end", held.End, "lockRequeueAfter", held.RequeueAfter)
	}
	if requeueAfter > 0 && requeueAfter < after {
		after = requeueAfter
	}
	log.Info("no fault (the cache was behind the API server, or the global lock is held by another instance); requeue",
		"after", after, "error", err.Error())
	return reconcile.Result{RequeueAfter: after}, nil
}

// quietAfter reports whether err is no fault, only a reason to look again
// later, and when: a stale cache (subreconcile.DefaultConflictDelay, as a
// backstop to the watch) or the lock held elsewhere (its
// HeldError.RequeueAfter, or a second when it is none).
// Like every, it reads err from the outside in and takes the first layer
// that is either; a join is quiet when every part is, at the earliest of
// their times. A join without parts is not.
func quietAfter(err error) (time.Duration, bool) {
	for err != nil {
		if staleHere(err) {
			return subreconcile.DefaultConflictDelay, true
		}
		if lockHeldHere(err) {
			after := err.(*locking.HeldError).RequeueAfter
			if after <= 0 {
				after = time.Second // the lock record's precision
			}
			return after, true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			var earliest time.Duration
			n := 0
			for _, part := range u.Unwrap() {
				if part == nil {
					continue
				}
				after, ok := quietAfter(part)
				if !ok {
					return 0, false
				}
				if n == 0 || after < earliest {
					earliest = after
				}
				n++
			}
			return earliest, n > 0
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return 0, false
		}
	}
	return 0, false
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
