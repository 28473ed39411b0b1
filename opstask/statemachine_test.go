package opstask_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestTransition(t *testing.T) {
	all := []opstask.TaskState{"", opstask.TaskStatePending, opstask.TaskStateInProgress, opstask.TaskStateSucceeded, opstask.TaskStateFailed, opstask.TaskStateRejected}
	legal := map[[2]opstask.TaskState]struct {
		typ   opstask.LastOperationType
		state opstask.LastOperationState
	}{
		{"", opstask.TaskStateInProgress}:                         {opstask.LastOperationTypeExecution, opstask.LastOperationStateInProgress},
		{opstask.TaskStatePending, opstask.TaskStateInProgress}:   {opstask.LastOperationTypeExecution, opstask.LastOperationStateInProgress},
		{"", opstask.TaskStateRejected}:                           {opstask.LastOperationTypeAdmit, opstask.LastOperationStateFailed},
		{opstask.TaskStatePending, opstask.TaskStateRejected}:     {opstask.LastOperationTypeAdmit, opstask.LastOperationStateFailed},
		{opstask.TaskStateInProgress, opstask.TaskStateSucceeded}: {opstask.LastOperationTypeExecution, opstask.LastOperationStateCompleted},
		{opstask.TaskStateInProgress, opstask.TaskStateFailed}:    {opstask.LastOperationTypeExecution, opstask.LastOperationStateFailed},
	}
	for _, from := range all {
		for _, to := range all[1:] {
			name := fmt.Sprintf("%s → %s", orPending(from), to)
			t.Run(name, func(t *testing.T) {
				started := t0.Add(-time.Minute)
				s := opstask.Status{State: from}
				if from == opstask.TaskStateInProgress || from.Finished() {
					s.StartedAt = metaTime(started)
				}
				before := *s.DeepCopy()
				err := s.Transition(to, t0, "run-x", "why")
				op, ok := legal[[2]opstask.TaskState{from, to}]
				if ok != opstask.Legal(from, to) {
					t.Fatalf("Legal(%q, %q) = %v, want %v", from, to, !ok, ok)
				}
				if !ok {
					var te *opstask.TransitionError
					if !errors.Is(err, opstask.ErrIllegalTransition) || !errors.As(err, &te) || te.From != orPending(from) || te.To != to {
						t.Fatalf("got %v, want a TransitionError %s → %s", err, orPending(from), to)
					}
					if s.State != before.State || s.LastOperation != nil || s.LastTransitionTime != nil {
						t.Fatalf("a refused transition changed the status: %+v", s)
					}
					return
				}
				if err != nil {
					t.Fatalf("legal transition refused: %v", err)
				}
				if s.State != to || !s.LastTransitionTime.Time.Equal(t0) {
					t.Errorf("state %s at %v, want %s at %v", s.State, s.LastTransitionTime, to, t0)
				}
				wantStart := started
				if orPending(from) == opstask.TaskStatePending {
					wantStart = t0
				}
				if s.StartedAt == nil || !s.StartedAt.Time.Equal(wantStart) {
					t.Errorf("startedAt %v, want %v", s.StartedAt, wantStart)
				}
				lo := s.LastOperation
				if lo == nil || lo.Type != op.typ || lo.State != op.state || lo.RunID != "run-x" || lo.Description != "why" || !lo.LastUpdateTime.Time.Equal(t0) {
					t.Errorf("lastOperation %+v, want %s/%s by run-x at %v", lo, op.typ, op.state, t0)
				}
			})
		}
	}
}

func TestProgressAndCleanupNeedTheRightState(t *testing.T) {
	s := opstask.Status{}
	if err := s.Progress(t0, "r", "x"); !errors.Is(err, opstask.ErrIllegalTransition) {
		t.Errorf("progress on a pending task: %v, want ErrIllegalTransition", err)
	}
	if err := s.Cleanup(t0, opstask.LastOperationStateInProgress, "r", "x"); !errors.Is(err, opstask.ErrIllegalTransition) {
		t.Errorf("cleanup of a pending task: %v, want ErrIllegalTransition", err)
	}
	s.State = opstask.TaskStateSucceeded
	if err := s.Cleanup(t0, opstask.LastOperationStateInProgress, "r", "x"); err != nil || s.LastOperation.Type != opstask.LastOperationTypeCleanup {
		t.Errorf("cleanup of a succeeded task: %v, %+v", err, s.LastOperation)
	}
	if err := s.Progress(t0, "r", "x"); !errors.Is(err, opstask.ErrIllegalTransition) {
		t.Errorf("progress on a finished task: %v, want ErrIllegalTransition", err)
	}
}

func TestAddErrorKeepsTheNewestMaxLastErrors(t *testing.T) {
	var s opstask.Status
	for i := range opstask.MaxLastErrors + 5 {
		s.AddError("E", fmt.Sprint(i), t0.Add(time.Duration(i)*time.Second))
	}
	if len(s.LastErrors) != opstask.MaxLastErrors {
		t.Fatalf("%d errors kept, want %d", len(s.LastErrors), opstask.MaxLastErrors)
	}
	if first, last := s.LastErrors[0].Description, s.LastErrors[opstask.MaxLastErrors-1].Description; first != "5" || last != fmt.Sprint(opstask.MaxLastErrors+4) {
		t.Errorf("kept errors %s..%s, want 5..%d", first, last, opstask.MaxLastErrors+4)
	}
}

func orPending(s opstask.TaskState) opstask.TaskState {
	if s == "" {
		return opstask.TaskStatePending
	}
	return s
}
