package crt

import (
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/internal/storeerr"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/memstore"
	"github.com/groundskeeper-io/groundskeeper/retention"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// The two classes of an error. doNotRetry: retrying cannot cure it (bad
// input or configuration, a conflict a person must resolve, corrupt state,
// a bug). mayRetry: a later attempt may succeed; for an error type, it also
// means "judged by the error it wraps".
const (
	doNotRetry = true
	mayRetry   = false
)

// classes classifies every exported error sentinel and error type of the
// module's public packages, one line each; TestEveryErrorIsClassified fails
// when one is missing and says which line to add. Only the doNotRetry lines
// change what Terminal does (and their sentinels are named in Terminal's
// documentation, which TestTerminalDocListsTheTerminalSentinels checks);
// the mayRetry lines record that the error was judged retryable, not
// forgotten.
var classes = []class{
	// lifecycle: bad input and a foreign controller need a person. A stale
	// owner reference is the garbage collector's to remove (it removes a
	// reference to an object that is gone, or deletes a claim left with
	// none), after which a retry goes through. Conflicts are the API
	// server's; a retry reads again.
	sentinel(lifecycle.ErrInvalidPolicy, doNotRetry),
	sentinel(lifecycle.ErrInvalidConfig, doNotRetry),
	sentinel(lifecycle.ErrInvalidInput, doNotRetry),
	sentinel(lifecycle.ErrConflictingController, doNotRetry),
	sentinel(lifecycle.ErrStaleOwnerReference, mayRetry),
	sentinel(lifecycle.ErrTooManyConflicts, mayRetry),
	errorType[*lifecycle.PolicyError](doNotRetry),
	errorType[*lifecycle.ConflictError](doNotRetry),

	// backupstore: what the caller or the store's configuration must
	// change is terminal; a missing Secret may be created, a full bucket
	// emptied, a retention period ends, an incomplete deletion or copy is
	// resumed by the next run. crt does not import backupstore, so that an
	// operator that uses crt without it links no cloud SDK: its sentinels
	// are classified here by the values it re-exports from
	// internal/storeerr (backupstore.ErrX is storeerr.ErrX), and its error
	// types, which Terminal judges by the sentinels they wrap (a
	// *PrefixError is ErrUnsafePrefix), in the tests' unimportedTypes.
	sentinel(storeerr.ErrInvalidConfig, doNotRetry),
	sentinel(storeerr.ErrUnsafePrefix, doNotRetry),
	sentinel(storeerr.ErrSecretKeyMissing, doNotRetry),
	sentinel(storeerr.ErrUnsupportedScheme, doNotRetry),
	sentinel(storeerr.ErrExpiryUnsupported, doNotRetry),
	sentinel(storeerr.ErrTooManyRules, doNotRetry),
	sentinel(storeerr.ErrNotOwned, doNotRetry), // share's: waits for an administrator, whose change reconciles again
	sentinel(storeerr.ErrSecretNotFound, mayRetry),
	sentinel(storeerr.ErrBucketFull, mayRetry),
	sentinel(storeerr.ErrPoolFull, mayRetry),
	sentinel(storeerr.ErrStoreNotEmpty, mayRetry), // share's: the objects' owners delete them, and the pool tries again
	sentinel(storeerr.ErrWriterRunning, mayRetry), // crt/backups': the writer's pods go
	sentinel(storeerr.ErrRetained, mayRetry),
	sentinel(storeerr.ErrIncomplete, mayRetry),
	sentinel(storeerr.ErrTargetDiffers, mayRetry), // a person moves the target's object; a copy error is ErrIncomplete too
	sentinel(storeerr.ErrLegacyNotCopied, mayRetry),
	sentinel(storeerr.ErrLegacyInUse, mayRetry), // the other entry's migration copies, then this one deletes

	// opstask: a bad spec or configuration, a spec changed under an
	// execution (a new task is needed) and an illegal transition (a bug)
	// are terminal. Store conflicts and absences, unmet preconditions
	// and the causes of an executor's canceled context (recorded on the
	// task by the controller) are not.
	sentinel(opstask.ErrInvalidSpec, doNotRetry),
	sentinel(opstask.ErrInvalidConfig, doNotRetry),
	sentinel(opstask.ErrIllegalTransition, doNotRetry),
	sentinel(opstask.ErrSpecChanged, doNotRetry),
	sentinel(opstask.ErrConflict, mayRetry),
	sentinel(opstask.ErrNotFound, mayRetry),
	sentinel(opstask.ErrUnmet, mayRetry),
	sentinel(opstask.ErrTimeout, mayRetry),
	sentinel(opstask.ErrInterrupted, mayRetry),
	sentinel(opstask.ErrLostClaim, mayRetry),
	sentinel(opstask.ErrDeleted, mayRetry),
	sentinel(memstore.ErrExists, mayRetry),
	errorType[*opstask.TransitionError](doNotRetry),
	errorType[*opstask.CodedError](mayRetry),

	// locking: configuration, a corrupt record and a transaction used
	// after its Update (a bug) are terminal. A held lock ends, a deny-list
	// entry is lifted with Allow (no change of the reconciled object that
	// a terminal error would wait for), backends come back.
	sentinel(locking.ErrInvalidConfig, doNotRetry),
	sentinel(locking.ErrCorrupt, doNotRetry),
	sentinel(locking.ErrTxnDone, doNotRetry),
	sentinel(locking.ErrLocked, mayRetry),
	sentinel(locking.ErrDenied, mayRetry),
	sentinel(locking.ErrNotHeld, mayRetry),
	sentinel(locking.ErrLeaseEnded, mayRetry),
	sentinel(locking.ErrConflict, mayRetry),
	sentinel(locking.ErrUnavailable, mayRetry),
	sentinel(locking.ErrUnknownResult, mayRetry),
	errorType[*locking.CorruptError](doNotRetry),
	errorType[*locking.HeldError](mayRetry),

	// retention: bad policies, durations, spans and options are terminal.
	// ErrTooManyDeletions is a brake whose cap is usually the operator's
	// setting, not the object's: raising it changes no object that a
	// terminal error would wait for.
	sentinel(retention.ErrInvalidPolicy, doNotRetry),
	sentinel(retention.ErrInvalidDuration, doNotRetry),
	sentinel(retention.ErrInvalidSpan, doNotRetry),
	sentinel(retention.ErrInvalidConfig, doNotRetry),
	sentinel(retention.ErrTooManyDeletions, mayRetry),
	errorType[*retention.PolicyError](doNotRetry),
	errorType[*retention.DurationError](doNotRetry),
	errorType[*retention.SpanError](doNotRetry),

	// subreconcile: a step's Terminal and a bad configuration are
	// terminal; a panic is retried, as controller-runtime retries its own.
	sentinel(subreconcile.ErrTerminal, doNotRetry),
	sentinel(subreconcile.ErrInvalidConfig, doNotRetry),
	sentinel(subreconcile.ErrPanic, mayRetry),
}

// class is one line of classes: is tells whether an error is this sentinel
// or of this type, by itself (not by what it wraps).
type class struct {
	is       func(error) bool
	terminal bool
}

// sentinel classifies an exported error variable.
func sentinel(target error, terminal bool) class {
	return class{is: func(err error) bool {
		if err == target {
			return true
		}
		x, ok := err.(interface{ Is(error) bool })
		return ok && x.Is(target)
	}, terminal: terminal}
}

// errorType classifies an exported error type E (a pointer type when its
// Error method has a pointer receiver).
func errorType[E error](terminal bool) class {
	return class{is: func(err error) bool { _, ok := err.(E); return ok }, terminal: terminal}
}

// terminalHere reports whether err by itself, not by what it wraps, says
// "do not retry": a doNotRetry error of classes, or a
// reconcile.TerminalError.
func terminalHere(err error) bool {
	if x, ok := err.(interface{ Is(error) bool }); ok && x.Is(reconcile.TerminalError(nil)) {
		return true
	}
	for _, c := range classes {
		if c.terminal && c.is(err) {
			return true
		}
	}
	return false
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
// An error is terminal when it is, or wraps, one of the packages'
// "do not retry" errors:
//
//   - lifecycle: ErrInvalidConfig, ErrInvalidPolicy, ErrInvalidInput,
//     ErrConflictingController (another controller owns the claim: a
//     person must decide);
//   - backupstore: ErrInvalidConfig, ErrUnsafePrefix, ErrSecretKeyMissing,
//     ErrUnsupportedScheme, ErrExpiryUnsupported, ErrTooManyRules;
//   - collect: ErrInvalidConfig (backupstore/collect's, which is
//     backupstore's);
//   - share: ErrInvalidConfig (backupstore/share's, which is
//     backupstore's), ErrNotOwned (a store bucket the pool cannot prove
//     its own: a person decides);
//   - opstask: ErrInvalidSpec, ErrInvalidConfig, ErrIllegalTransition,
//     ErrSpecChanged;
//   - locking: ErrInvalidConfig, ErrCorrupt, ErrTxnDone;
//   - retention: ErrInvalidPolicy, ErrInvalidDuration, ErrInvalidSpan,
//     ErrInvalidConfig;
//   - subreconcile: ErrInvalidConfig, ErrTerminal;
//
// or a reconcile.TerminalError already (returned as it is). A join
// (errors.Join, fmt.Errorf with several %w) is terminal only when every
// one of its parts is: lifecycle.SyncOwner's conflicting controller on one
// claim joined with a 503 on another is retried.
//
// Every other exported error of the packages is retryable, among them a
// missing Secret (backupstore.ErrSecretNotFound), a full bucket, a held or
// denied lock, a stale owner reference (the garbage collector removes it),
// conflicts, retention.ErrTooManyDeletions; so is any error of another
// origin. Configuration errors that a package returns without one of its
// sentinels cannot be told apart and are retried.
func Terminal(err error) error {
	if err == nil || !IsTerminal(err) || errors.Is(err, reconcile.TerminalError(nil)) {
		return err // nil, retryable, or terminal already
	}
	return reconcile.TerminalError(err)
}

// IsTerminal reports whether Terminal treats err as terminal.
func IsTerminal(err error) bool { return every(err, terminalHere) }
