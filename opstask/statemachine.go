package opstask

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TransitionError reports a state change the state machine does not allow.
// It wraps ErrIllegalTransition.
type TransitionError struct {
	From, To TaskState
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("%v: %s → %s (allowed: Pending → InProgress|Rejected, InProgress → Succeeded|Failed)", ErrIllegalTransition, e.From, e.To)
}

// Terminal reports true: retrying cannot cure the error (crt.Terminal).
func (*TransitionError) Terminal() bool { return true }

// Unwrap returns ErrIllegalTransition.
func (e *TransitionError) Unwrap() error { return ErrIllegalTransition }

// transitions maps each legal (from, to) pair to the operation it records.
var transitions = map[[2]TaskState]struct {
	typ   LastOperationType
	state LastOperationState
}{
	{TaskStatePending, TaskStateInProgress}:   {LastOperationTypeExecution, LastOperationStateInProgress},
	{TaskStatePending, TaskStateRejected}:     {LastOperationTypeAdmit, LastOperationStateFailed},
	{TaskStateInProgress, TaskStateSucceeded}: {LastOperationTypeExecution, LastOperationStateCompleted},
	{TaskStateInProgress, TaskStateFailed}:    {LastOperationTypeExecution, LastOperationStateFailed},
}

// Legal reports whether the state machine allows from → to. An empty from is
// Pending.
func Legal(from, to TaskState) bool {
	if from == "" {
		from = TaskStatePending
	}
	_, ok := transitions[[2]TaskState{from, to}]
	return ok
}

// Transition moves s to state to at now, or returns a *TransitionError and
// leaves s unchanged. It sets LastTransitionTime to now, StartedAt to now
// when leaving Pending, and LastOperation to the operation the transition
// completes: Execution/InProgress when starting, Admit/Failed when rejecting,
// Execution/Completed or Execution/Failed when finishing, with runID and
// description.
func (s *Status) Transition(to TaskState, now time.Time, runID, description string) error {
	from := s.State
	if from == "" {
		from = TaskStatePending
	}
	op, ok := transitions[[2]TaskState{from, to}]
	if !ok {
		return &TransitionError{From: from, To: to}
	}
	t := metav1.NewTime(now)
	s.State = to
	s.LastTransitionTime = &t
	if from == TaskStatePending {
		st := t
		s.StartedAt = &st
	}
	s.LastOperation = &LastOperation{Type: op.typ, State: op.state, LastUpdateTime: t, RunID: runID, Description: description}
	return nil
}

// Progress records, on an InProgress task, that its execution by runID is
// still running, with a new description. It is how executors report
// progress and how the controller renews its claim on the execution.
func (s *Status) Progress(now time.Time, runID, description string) error {
	if s.State != TaskStateInProgress {
		return fmt.Errorf("%w: progress on a task in state %s", ErrIllegalTransition, stateOrPending(s.State))
	}
	s.LastOperation = &LastOperation{Type: LastOperationTypeExecution, State: LastOperationStateInProgress,
		LastUpdateTime: metav1.NewTime(now), RunID: runID, Description: description}
	return nil
}

// Cleanup records, on a finished task, the state of its cleanup.
func (s *Status) Cleanup(now time.Time, state LastOperationState, runID, description string) error {
	if !s.State.Finished() {
		return fmt.Errorf("%w: cleanup of a task in state %s", ErrIllegalTransition, stateOrPending(s.State))
	}
	s.LastOperation = &LastOperation{Type: LastOperationTypeCleanup, State: state,
		LastUpdateTime: metav1.NewTime(now), RunID: runID, Description: description}
	return nil
}

// AddError appends an error to LastErrors, dropping the oldest beyond
// MaxLastErrors.
func (s *Status) AddError(code ErrorCode, description string, now time.Time) {
	s.LastErrors = append(s.LastErrors, LastError{Code: code, Description: description, ObservedAt: metav1.NewTime(now)})
	if n := len(s.LastErrors); n > MaxLastErrors {
		s.LastErrors = append(s.LastErrors[:0:0], s.LastErrors[n-MaxLastErrors:]...)
	}
}

func stateOrPending(s TaskState) TaskState {
	if s == "" {
		return TaskStatePending
	}
	return s
}

// finishedAt returns when a finished task finished: its last transition.
func (s *Status) finishedAt() time.Time {
	if s.LastTransitionTime == nil {
		return time.Time{}
	}
	return s.LastTransitionTime.Time
}
