package locking

import (
	"fmt"
	"time"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// Sentinel errors. Test them with errors.Is; the errors this package returns
// wrap them with context.
var (
	// ErrLocked means another live instance holds the lock. The error is a
	// *HeldError that says who and until when.
	ErrLocked = errclass.Retryable("locking: lock is held by another instance")

	// ErrDenied means this instance's lock ID is on the deny list: every
	// attempt to take or extend the lock fails until the entry is removed
	// with Allow set.
	ErrDenied = errclass.Retryable("locking: lock ID is on the deny list")

	// ErrNotHeld means Release did not clear the lock because this instance
	// does not hold it: another instance does, or this instance's lock has
	// expired or starts in the future. The error is a *HeldError.
	ErrNotHeld = errclass.Retryable("locking: lock is not held by this instance")

	// ErrConflict means a transaction conflicted with a concurrent one and
	// committed nothing. Backends return it; the Lock retries it a bounded
	// number of times before returning it. Retrying later is safe.
	ErrConflict = errclass.Retryable("locking: transaction conflict")

	// ErrUnavailable means the backend could not be reached, or did not
	// answer in time, so the operation could not be done. On its own it
	// means nothing was committed; retrying later is safe. Backends return
	// it, wrapped with what they were doing, instead of their client
	// library's errors.
	ErrUnavailable = errclass.Retryable("locking: backend unavailable")

	// ErrUnknownResult means the connection to the backend failed after a
	// commit was sent: the transaction may or may not have committed. A Take
	// that fails this way may have taken or extended the lock, and a Release
	// may have left it held; Holder says which, and calling Take again is
	// safe (it extends a lock this instance holds). Errors wrapping
	// ErrUnknownResult also wrap ErrUnavailable.
	ErrUnknownResult = errclass.Retryable("locking: transaction outcome unknown")

	// ErrInvalidConfig means New (or a backend's New) was given a
	// configuration it cannot work with. The error names the field and its
	// value. Retrying does not help.
	ErrInvalidConfig = errclass.Terminal("locking: invalid configuration")

	// ErrCorrupt means a stored lock record could not be decoded or has the
	// wrong shape. It is never treated as a free lock; a person has to look
	// at the stored value. Retrying does not help.
	ErrCorrupt = errclass.Terminal("locking: stored lock record is corrupt")

	// ErrLeaseEnded means the lease a Do ran under ended (its End, less
	// DoOptions.Margin, passed on Config.Clock) before the function could
	// start, or while it ran: what the function did after that was not
	// protected by the lock. Retrying takes the lock again.
	ErrLeaseEnded = errclass.Retryable("locking: the lease ended")

	// ErrTxnDone means a Txn was used after the Update it was given to had
	// returned: a bug in the caller. Every backend's Txn returns it.
	ErrTxnDone = errclass.Terminal("locking: transaction used after Update returned")
)

// HeldError describes the lock record that made Take or Release refuse. It
// wraps ErrLocked (Take) or ErrNotHeld (Release).
type HeldError struct {
	// LockID is the ID of the instance that asked.
	LockID string
	// Holder is the lock ID stored in the record.
	Holder string
	// Start and End are the stored start and end, with one-second precision.
	Start, End time.Time
	// RequeueAfter is, for ErrLocked, how long from the decision until this
	// instance may take the lock over if the holder does not extend it
	// (including the configured clock-skew tolerance). Zero for ErrNotHeld.
	RequeueAfter time.Duration
	// Reason says, for ErrNotHeld, why the record does not count as ours.
	Reason string

	err error
}

func (e *HeldError) Error() string {
	if e.err == ErrLocked {
		return fmt.Sprintf("lock ID %q: %v: held by %q until %s, requeue after %s",
			e.LockID, e.err, e.Holder, e.End.UTC().Format(time.RFC3339), e.RequeueAfter)
	}
	return fmt.Sprintf("lock ID %q: %v: %s (holder %q, start %s, end %s)",
		e.LockID, e.err, e.Reason, e.Holder,
		e.Start.UTC().Format(time.RFC3339), e.End.UTC().Format(time.RFC3339))
}

// Terminal reports false: the error is retried, or judged by the error
// it wraps (crt.Terminal).
func (*HeldError) Terminal() bool { return false }

// Unwrap returns ErrLocked or ErrNotHeld.
func (e *HeldError) Unwrap() error { return e.err }

// CorruptError describes a stored value that is not a valid record. It wraps
// ErrCorrupt.
type CorruptError struct {
	Key, Value []byte
	// Reason says what is wrong with Value.
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("key %q: %v: %s (value %q)", e.Key, ErrCorrupt, e.Reason, e.Value)
}

// Terminal reports true: retrying cannot cure the error (crt.Terminal).
func (*CorruptError) Terminal() bool { return true }

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
