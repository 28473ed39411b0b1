package opstask

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// Handler is what an operator registers for one kind of task (a task's kind
// is the name of the spec.config member it sets, Task.Kind): that name, the
// kind's preconditions and its executor.
type Handler struct {
	// Name is the json name of the spec.config member that selects this
	// kind, e.g. "onDemandSnapshot".
	Name string

	// Executor performs the task. It is required.
	Executor Executor

	// Preconditions are checked, in order, when the task reaches the head
	// of its target's queue, against the target's state at that moment. The
	// first that is not met rejects the task.
	Preconditions []Precondition

	// Resumable says that Execute is idempotent and may be called again,
	// with Run.Resumed set, for an execution that another controller
	// started and could not finish (it stopped or lost its lease). When
	// false, such an execution fails with code Interrupted.
	Resumable bool

	// Timeout returns how long an execution of t may take, counted from
	// the task's startedAt, across resumptions. Nil means the controller's
	// DefaultTimeout.
	Timeout func(t *Task) (time.Duration, error)

	// DuplicateKey returns what distinguishes tasks of this kind for the
	// built-in duplicate check, e.g. the snapshot type. Nil means the whole
	// config: two tasks of this kind with equal configs are duplicates.
	DuplicateKey func(t *Task) (string, error)

	// AllowDuplicates turns the built-in duplicate check off for the kind.
	AllowDuplicates bool

	// Cleanup deletes what the executor created for t. It runs after the
	// TTL, before the task is deleted, and must be idempotent: it is
	// retried when it fails, and taken over by another controller when the
	// one running it stops. Its ctx is canceled with cause ErrLostClaim
	// when this controller loses its claim on the cleanup; it must return
	// promptly then. Nil means nothing to clean up.
	Cleanup func(ctx context.Context, t *Task) error
}

// Executor performs a task.
type Executor interface {
	// Execute performs run.Task. ctx is canceled when the kind's timeout
	// passes (cause ErrTimeout), when this controller loses its claim on the
	// execution (cause ErrLostClaim), or when the controller stops; Execute
	// must return promptly then. A nil error makes the task Succeeded, its
	// lastOperation.description the executor's last Run.Progress report
	// (what it did), or "execution completed" when it made none; an error
	// makes it Failed, with the code of a CodedError (WithCode) or
	// ExecutionFailed.
	Execute(ctx context.Context, run *Run) error
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, run *Run) error

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, run *Run) error { return f(ctx, run) }

var _ Executor = ExecutorFunc(nil)

// Precondition decides whether a task may run now.
type Precondition interface {
	// Check returns nil when the task may run, an error wrapping ErrUnmet
	// (see Unmet) to reject it, one wrapping ErrInvalidSpec to reject it
	// with code InvalidSpec (a config it cannot decode), and any other error
	// when it cannot tell now: the task then stays at the head of its queue
	// and is checked again.
	Check(ctx context.Context, t *Task) error
}

// PreconditionFunc adapts a function to Precondition.
type PreconditionFunc func(ctx context.Context, t *Task) error

// Check calls f.
func (f PreconditionFunc) Check(ctx context.Context, t *Task) error { return f(ctx, t) }

var _ Precondition = PreconditionFunc(nil)

// ErrUnmet marks a precondition that is not met: the task is rejected.
var ErrUnmet = errclass.Retryable("opstask: precondition not met")

// Unmet returns an error for a precondition that is not met, recorded in
// LastErrors with code (PreconditionFailed when empty) and the reason.
func Unmet(code ErrorCode, reason string) error {
	if code == "" {
		code = CodePreconditionFailed
	}
	return &CodedError{Code: code, Err: fmt.Errorf("%w: %s", ErrUnmet, reason)}
}

// Run is one execution of a task.
type Run struct {
	// Task is a copy of the task as it was when the execution started.
	Task *Task
	// ID is the run ID recorded in lastOperation.runID.
	ID string
	// Resumed is set when this execution takes over one that another
	// controller started: the executor may have had side effects already.
	Resumed bool

	progress func(ctx context.Context, description string) error
	// record changes the task's status through the execution's claim and
	// returns the status written (Step, Approval).
	record func(ctx context.Context, change func(s *Status, now time.Time) error) (*Status, error)
}

// Progress records description in lastOperation.description. It also
// renews the controller's claim on the execution. It returns an error
// wrapping ErrLostClaim when the claim is lost (the executor's context is
// canceled too), and other errors when the store could not be written; those
// are not fatal.
func (r *Run) Progress(ctx context.Context, description string) error {
	if r.progress == nil {
		return nil
	}
	return r.progress(ctx, description)
}

// dupKey returns the duplicate key of t under kind k.
func (k *Handler) dupKey(t *Task, raw json.RawMessage) (string, error) {
	if k.DuplicateKey != nil {
		return k.DuplicateKey(t)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", fmt.Errorf("%w: spec.config.%s: %v", ErrInvalidSpec, k.Name, err)
	}
	// Compact keeps key order; decode and re-encode for a canonical form.
	var v any
	if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
		return "", fmt.Errorf("%w: spec.config.%s: %v", ErrInvalidSpec, k.Name, err)
	}
	b, _ := json.Marshal(v)
	return string(b), nil
}
