package crt

import (
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// terminalHere reports whether err by itself, not by what it wraps, says
// "do not retry": a reconcile.TerminalError, or an error whose method
// Terminal() bool returns true (every sentinel and error type of the
// module's packages has one, and so may the caller's own).
func terminalHere(err error) bool {
	if x, ok := err.(interface{ Is(error) bool }); ok && x.Is(reconcile.TerminalError(nil)) {
		return true
	}
	x, ok := err.(interface{ Terminal() bool })
	return ok && x.Terminal()
}

// every reports whether here holds for err or for an error it wraps,
// reading a join (errors.Join, fmt.Errorf with several %w, any error with
// Unwrap() []error) as as strong as its weakest part: there, here must hold
// for every part. A join without parts holds nothing.
func every(err error, here func(error) bool) bool {
	for err != nil {
		if here(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			n := 0
			for _, part := range u.Unwrap() {
				if part == nil {
					continue
				}
				if !every(part, here) {
					return false
				}
				n++
			}
			return n > 0
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return false
		}
	}
	return false
}

// Terminal returns err wrapped in reconcile.TerminalError when retrying
// cannot cure it, so that controller-runtime logs it and does not requeue
// the object; any other error is returned as it is (nil stays nil).
//
// An error is terminal when it, or an error it wraps, has a method
// Terminal() bool that returns true, or is a reconcile.TerminalError
// already (returned as it is). Each sentinel and error type of the
// module's packages has that method, set where it is declared: bad input
// or configuration (every ErrInvalidConfig, ErrInvalidPolicy,
// ErrInvalidSpec, ...), a conflict a person must resolve
// (lifecycle.ErrConflictingController, pool.ErrNotOwned), corrupt state
// (locking.ErrCorrupt) and a bug (opstask.ErrIllegalTransition,
// locking.ErrTxnDone) are terminal; a missing Secret, a full bucket, a
// held or denied lock, a stale owner reference (the garbage collector
// removes it), conflicts and retention.ErrTooManyDeletions are not. An
// operator's own error type takes part by declaring the method.
//
// A join (errors.Join, fmt.Errorf with several %w) is terminal only when
// every one of its parts is: lifecycle.SyncOwner's conflicting controller
// on one claim joined with a 503 on another is retried. Any error of
// another origin is retried.
func Terminal(err error) error {
	if err == nil || !IsTerminal(err) || errors.Is(err, reconcile.TerminalError(nil)) {
		return err // nil, retryable, or terminal already
	}
	return reconcile.TerminalError(err)
}

// IsTerminal reports whether Terminal treats err as terminal.
func IsTerminal(err error) bool { return every(err, terminalHere) }
