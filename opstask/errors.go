package opstask

import (
	"errors"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// Sentinel errors. Test them with errors.Is; errors returned by this package
// wrap them with the task, the states or the field concerned.
var (
	// ErrIllegalTransition means a state change that the state machine does
	// not allow was asked for. The error is a *TransitionError naming both
	// states.
	ErrIllegalTransition = errclass.Terminal("opstask: illegal task state transition")

	// ErrConflict means the task changed in the store since it was read (its
	// resourceVersion is not current): another controller, or a person, got
	// there first. Nothing was written. Re-read before retrying.
	ErrConflict = errclass.Retryable("opstask: task changed since it was read")

	// ErrNotFound means the task does not exist (any more) in the store.
	ErrNotFound = errclass.Retryable("opstask: task not found")

	// ErrInvalidSpec means a task's spec cannot be processed: no config
	// member or several, an unregistered kind, or a config the kind rejects.
	// Such a task is rejected with code InvalidSpec; retrying does not help.
	ErrInvalidSpec = errclass.Terminal("opstask: invalid task spec")

	// ErrInvalidConfig means the Controller's Config or a Handler is unusable;
	// the error names the field and its value.
	ErrInvalidConfig = errclass.Terminal("opstask: invalid configuration")

	// ErrTimeout is the cause of an executor context canceled because the
	// kind's timeout passed; the task fails with code Timeout.
	ErrTimeout = errclass.Retryable("opstask: task timed out")

	// ErrInterrupted means an execution was interrupted (its controller
	// stopped) and its kind cannot resume it; the task fails with code
	// Interrupted.
	ErrInterrupted = errclass.Retryable("opstask: task execution interrupted and kind cannot resume")

	// ErrLostClaim is the cause of an executor's (or a Handler.Cleanup's)
	// context canceled because this controller no longer owns the execution
	// (or the cleanup): another controller took it over, or no write
	// confirmed the claim within 2/3 of the lease.
	ErrLostClaim = errclass.Retryable("opstask: execution claim lost")

	// ErrSpecChanged means an execution was not taken over because the
	// task's spec is not the one it started with (Status.StartedWith): its
	// kind, config or target changed, or what it started with was not
	// recorded. The task fails with code SpecChanged; a task with the new
	// spec is a new task.
	ErrSpecChanged = errclass.Terminal("opstask: task spec changed since its execution started")

	// ErrDeleted is the cause of an executor's context canceled because the
	// task's deletion was requested while it ran. The task stays, held,
	// until the executor has returned; nothing more is written to its
	// status. When a renewal of the claim meets the deletion first, the
	// cause is ErrLostClaim instead: the deletion changed the task.
	ErrDeleted = errclass.Retryable("opstask: task deleted while it ran")
)

// CodedError is an error with an ErrorCode for Status.LastErrors. Executors
// and preconditions return one (see WithCode) to choose the code recorded.
type CodedError struct {
	Code ErrorCode
	Err  error
}

// Error returns the wrapped error's message; the code goes to LastError.Code.
func (e *CodedError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *CodedError) Unwrap() error { return e.Err }

// WithCode wraps err so that it is recorded with code in Status.LastErrors.
func WithCode(code ErrorCode, err error) error {
	if err == nil {
		return nil
	}
	return &CodedError{Code: code, Err: err}
}

// Terminal reports false: the error is retried, or judged by the error
// it wraps (crt.Terminal).
func (*CodedError) Terminal() bool { return false }

// codeOf returns the code of the outermost CodedError in err, or def.
func codeOf(err error, def ErrorCode) ErrorCode {
	var ce *CodedError
	if errors.As(err, &ce) && ce.Code != "" {
		return ce.Code
	}
	return def
}
