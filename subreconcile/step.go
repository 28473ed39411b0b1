package subreconcile

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// Object is what the runner needs from a resource: a Kubernetes object (so
// events can be recorded against it), its metadata.generation (for generation
// tracking) and a typed deep copy (for the per-step copy of the normalized
// spec). Every controller-gen generated pointer type, such as
// *v1.FoundationDBCluster, satisfies Object[*v1.FoundationDBCluster].
type Object[T any] interface {
	runtime.Object
	GetGeneration() int64
	DeepCopy() T
}

// Step is one self-contained chunk of a reconcile loop. It receives the latest
// resource, decides for itself whether it has work, and returns nil when the
// loop can go on, or a Requeue when it cannot finish now.
//
// Reconcile may change obj (typically its status) and later steps see those
// changes; changes to the spec are undone before the next step when
// Config.RestoreSpec is set. Reconcile must be idempotent: a loop can be
// started over at any point, and every step runs on every loop.
//
// loop is only valid for the duration of the call.
type Step[T Object[T], S any] interface {
	Reconcile(ctx context.Context, obj T, loop Loop[S]) *Requeue
}

// Func adapts an ordinary function to a Step.
type Func[T Object[T], S any] func(ctx context.Context, obj T, loop Loop[S]) *Requeue

// Reconcile calls f(ctx, obj, loop).
func (f Func[T, S]) Reconcile(ctx context.Context, obj T, loop Loop[S]) *Requeue {
	return f(ctx, obj, loop)
}

// probe is the smallest Object, for the compile-time check that Func
// implements Step.
type probe struct{ runtime.Object }

func (*probe) GetGeneration() int64 { return 0 }
func (p *probe) DeepCopy() *probe   { return p }

var _ Step[*probe, struct{}] = Func[*probe, struct{}](nil)

// Named is a step with the name used in logs, events, metrics and wrapped
// errors. Names need not be unique (the FoundationDB operator runs
// UpdateStatus first and last), but steps that share a name share their
// metrics series.
type Named[T Object[T], S any] struct {
	Name string
	Step Step[T, S]
}

// NamedFunc returns f as a named step. Unlike a Named literal holding a Func,
// it infers the type parameters from f.
func NamedFunc[T Object[T], S any](name string, f func(ctx context.Context, obj T, loop Loop[S]) *Requeue) Named[T, S] {
	return Named[T, S]{Name: name, Step: Func[T, S](f)}
}

// Requeue is what a step returns when the loop cannot be finished now.
//
// A nil *Requeue means "done, go on". A non-nil Requeue always asks for the
// resource to be reconciled again; Delayed says when the chain stops:
//
//   - immediate (Delayed false): the chain stops after this step;
//   - delayed (Delayed true): the remaining steps run first, and the loop
//     requeues at the end.
//
// Err, when set, is returned from the loop wrapped with the step's name, so the
// caller's rate limiter decides when to retry (controller-runtime ignores
// RequeueAfter when an error is returned). An error made with Terminal stops
// the chain whatever Delayed says, and asks for no retry. An API-server
// optimistic-concurrency conflict is not treated as an error (see
// Config.ConflictDelay).
type Requeue struct {
	// Delay is how long to wait before the next loop. Zero or negative means
	// "soon" and becomes Config.MinDelay.
	Delay time.Duration

	// Message explains the requeue to a person. When empty and Err is set,
	// the error's text is used.
	Message string

	// Err is the error that forced the requeue, if any.
	Err error

	// Delayed lets the remaining steps run before the loop requeues.
	Delayed bool
}

// RequeueAfter returns an immediate requeue: the chain stops after this step
// and the loop is retried after delay.
func RequeueAfter(delay time.Duration, message string) *Requeue {
	return &Requeue{Delay: delay, Message: message}
}

// RequeueOnError returns an immediate requeue carrying err.
func RequeueOnError(err error) *Requeue {
	return &Requeue{Err: err}
}

// DelayedRequeueAfter returns a delayed requeue: the remaining steps run, then
// the loop is retried after (at most) delay.
func DelayedRequeueAfter(delay time.Duration, message string) *Requeue {
	return &Requeue{Delay: delay, Message: message, Delayed: true}
}

// DelayedRequeueOnError returns a delayed requeue carrying err: the remaining
// steps run, then the loop returns err (joined with any other errors).
func DelayedRequeueOnError(err error) *Requeue {
	return &Requeue{Err: err, Delayed: true}
}

// Sentinel errors, checked with errors.Is on Outcome.Err.
var (
	// ErrTerminal marks an error after which the resource must not be
	// retried until it changes. Make one with Terminal.
	ErrTerminal = errclass.Terminal("subreconcile: terminal error")

	// ErrPanic marks a step that panicked. The runner recovers the panic,
	// logs the stack and ends the loop with this error, wrapped with the
	// step's name.
	ErrPanic = errclass.Retryable("subreconcile: panic")

	// ErrInvalidConfig: New or NewMetrics was given a configuration it
	// cannot work with. Every configuration error wraps it and names the
	// field and its value.
	ErrInvalidConfig = errclass.Terminal("subreconcile: invalid configuration")
)

// Terminal marks err as terminal: the runner stops the chain at once and the
// outcome asks for no retry. errors.Is(Terminal(err), ErrTerminal) and
// errors.Is(Terminal(err), err) both hold. Terminal(nil) is nil.
//
// For controller-runtime, convert a terminal outcome error with
// reconcile.TerminalError(err) so its controller does not requeue.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

// IsTerminal reports whether err was made by Terminal, or wraps such an
// error. A join (an error with Unwrap() []error, as errors.Join and a
// fmt.Errorf with several %w make) is terminal only when every part is: one
// step's terminal error joined with another's retryable one must still be
// retried, or the retryable failure is never retried at all.
func IsTerminal(err error) bool {
	for err != nil {
		if x, ok := err.(interface{ Is(error) bool }); ok && x.Is(ErrTerminal) {
			return true
		}
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			parts := e.Unwrap()
			for _, p := range parts {
				if !IsTerminal(p) {
					return false
				}
			}
			return len(parts) > 0
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		default:
			return err == ErrTerminal
		}
	}
	return false
}

type terminalError struct{ err error }

func (e *terminalError) Error() string        { return "terminal error: " + e.err.Error() }
func (e *terminalError) Unwrap() error        { return e.err }
func (e *terminalError) Is(target error) bool { return target == ErrTerminal }
