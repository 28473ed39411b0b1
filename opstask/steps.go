package opstask

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApprovalAnnotation is the annotation through which a person approves a
// step of a task in a Kubernetes store (kubestore, crt/tasks.NewStore): its
// value is a comma-separated list of approval tokens (see Run.Approval), e.g.
//
//	kubectl annotate etcdopstask recover-main opstask.groundskeeper.io/approve=restore/5f1c0a9e2b
const ApprovalAnnotation = "opstask.groundskeeper.io/approve"

// StepFunc does one step of an execution and returns what it did
// (recorded in the step's description) and what it decided, for the steps
// after it (recorded in the step's result).
type StepFunc func(ctx context.Context) (description, result string, err error)

// Step runs do as the step name of the execution, unless the task's status
// records the step Completed: then it returns the recorded result without
// running do. So a resumed execution (Run.Resumed) goes on at the first
// step that did not complete, and a step that failed is run again when the
// executor calls Step with its name again, while the steps completed
// before it are not. Before do, the step is recorded InProgress (its
// Attempts counted); after it, Completed with its description and result,
// or Failed with its error, which Step returns (a step interrupted because
// ctx is done stays InProgress). Every record is a status
// write through the execution's claim, like Progress, and also becomes
// lastOperation.description.
//
// A step must be idempotent, as a Resumable executor is: the controller
// may stop after do had effects and before they were recorded. Steps are
// recorded in the order first taken, at most MaxSteps of them. Step and
// Approval are not safe for concurrent use.
func (r *Run) Step(ctx context.Context, name string, do StepFunc) (string, error) {
	if s := r.step(name); s != nil && s.State == StepStateCompleted {
		return s.Result, nil
	}
	err := r.recordStep(ctx, name, func(s *Step) {
		s.State, s.Attempts, s.Description = StepStateInProgress, s.Attempts+1, "started"
	})
	if err != nil {
		return "", err
	}
	desc, result, err := do(ctx)
	if err != nil && ctx.Err() != nil {
		// Interrupted (the controller stops, the claim is lost, the
		// timeout passed): the step stays InProgress, for a resumed
		// execution to take again.
		return "", fmt.Errorf("step %s: %w", name, err)
	}
	if err != nil {
		if rerr := r.recordStep(ctx, name, func(s *Step) {
			s.State, s.Description = StepStateFailed, err.Error()
		}); rerr != nil && ctx.Err() == nil {
			return "", fmt.Errorf("step %s: %w (and recording the failure: %v)", name, err, rerr)
		}
		return "", fmt.Errorf("step %s: %w", name, err)
	}
	err = r.recordStep(ctx, name, func(s *Step) {
		s.State, s.Description, s.Result = StepStateCompleted, desc, result
	})
	if err != nil {
		return "", err
	}
	return result, nil
}

// ApprovalToken returns the token that approves step with plan: the step's
// name and a digest of the plan, so that an approval given for one plan
// does not approve another.
func ApprovalToken(step, plan string) string {
	sum := sha256.Sum256([]byte(plan))
	return step + "/" + hex.EncodeToString(sum[:5])
}

// Approval is a gate before an irreversible step: it returns nil once a
// person approved plan for step, the step it gates, and until then waits.
// plan says what the step will do (for a recovery: from which backup,
// losing what); it must be the same when the execution is resumed, so
// decide it in an earlier Step and pass that step's result.
//
// The approval is recorded in Status.Approvals under the gated step's name,
// apart from the steps' records in Status.Steps: the approval and the step
// it gates share the name, and neither reads the other's record.
//
//	plan, err := run.Step(ctx, "plan", decide)
//	...
//	if err := run.Approval(ctx, "upload", plan); err != nil {
//		return err
//	}
//	_, err = run.Step(ctx, "upload", upload) // runs once, after the approval
//
// The task is approved when Task.Approvals holds ApprovalToken(step, plan);
// an approval of another plan does not count. Without it, Approval records
// the approval AwaitingApproval, its description the plan and the token to
// approve it with, its token the token alone (what taskctl's Approve
// sets), and waits until ctx is done. In a Kubernetes store,
// approving the task (setting ApprovalAnnotation) changes it, which ends
// this execution's claim (ctx is canceled with cause ErrLostClaim); the
// execution is taken over LeaseDuration later and, resumed, finds the
// approval. So a kind with an approval must be Resumable, and its Timeout,
// counted from startedAt, includes the wait for the person. Once
// approved, the approval is recorded Approved and is not asked again.
func (r *Run) Approval(ctx context.Context, step, plan string) error {
	token := ApprovalToken(step, plan)
	if a := r.approval(step); a != nil && a.State == ApprovalStateApproved && a.Token == token {
		return nil
	}
	if slices.Contains(r.Task.Approvals, token) {
		return r.recordApproval(ctx, step, func(a *Approval) {
			a.State, a.Token = ApprovalStateApproved, token
			a.Description = "approved (" + token + "): " + plan
		})
	}
	err := r.recordApproval(ctx, step, func(a *Approval) {
		a.State, a.Token = ApprovalStateAwaiting, token
		a.Description = fmt.Sprintf("awaiting approval: %s; approve with the token %s (annotation %s)", plan, token, ApprovalAnnotation)
	})
	if err != nil {
		return err
	}
	<-ctx.Done()
	return fmt.Errorf("step %s awaiting approval: %w", step, context.Cause(ctx))
}

// StepResult returns the result recorded for the completed step name, and
// whether there is one.
func (r *Run) StepResult(name string) (string, bool) {
	if s := r.step(name); s != nil && s.State == StepStateCompleted {
		return s.Result, true
	}
	return "", false
}

func (r *Run) step(name string) *Step {
	for i := range r.Task.Status.Steps {
		if r.Task.Status.Steps[i].Name == name {
			return &r.Task.Status.Steps[i]
		}
	}
	return nil
}

func (r *Run) approval(step string) *Approval {
	for i := range r.Task.Status.Approvals {
		if r.Task.Status.Approvals[i].Step == step {
			return &r.Task.Status.Approvals[i]
		}
	}
	return nil
}

// recordStep writes the change of step name to the task's status through
// the execution's claim, and keeps the written status as the run's view.
func (r *Run) recordStep(ctx context.Context, name string, change func(*Step)) error {
	err := r.recordStatus(ctx, func(s *Status, now time.Time) error {
		return changeStep(s, name, r.ID, now, change)
	})
	if err != nil {
		return fmt.Errorf("record step %s: %w", name, err)
	}
	return nil
}

// recordApproval writes the change of the approval of step to the task's
// status, as recordStep does for a step.
func (r *Run) recordApproval(ctx context.Context, step string, change func(*Approval)) error {
	err := r.recordStatus(ctx, func(s *Status, now time.Time) error {
		return changeApproval(s, step, r.ID, now, change)
	})
	if err != nil {
		return fmt.Errorf("record approval of step %s: %w", step, err)
	}
	return nil
}

// recordStatus writes change to the task's status through the execution's
// claim, and keeps the written status as the run's view.
func (r *Run) recordStatus(ctx context.Context, change func(s *Status, now time.Time) error) error {
	if r.record == nil {
		// A Run made outside a controller (an executor's unit test): the
		// steps live in Task.Status alone, without times.
		return change(&r.Task.Status, time.Time{})
	}
	st, err := r.record(ctx, change)
	if err != nil {
		return err
	}
	r.Task.Status = *st
	return nil
}

// changeStep applies change to step name of s (appending it when new) and
// mirrors the step in lastOperation.description.
func changeStep(s *Status, name, runID string, now time.Time, change func(*Step)) error {
	i := slices.IndexFunc(s.Steps, func(st Step) bool { return st.Name == name })
	if i < 0 {
		if len(s.Steps) >= MaxSteps {
			return fmt.Errorf("step %s: the task has %d steps already, the most status.steps holds", name, MaxSteps)
		}
		s.Steps = append(s.Steps, Step{Name: name})
		i = len(s.Steps) - 1
	}
	st := &s.Steps[i]
	change(st)
	st.RunID, st.LastUpdateTime = runID, metav1.NewTime(now)
	if s.State == TaskStateInProgress {
		return s.Progress(now, runID, fmt.Sprintf("step %s %s: %s", name, st.State, st.Description))
	}
	return nil
}

// changeApproval applies change to the approval of step in s (appending it
// when new) and mirrors it in lastOperation.description.
func changeApproval(s *Status, step, runID string, now time.Time, change func(*Approval)) error {
	i := slices.IndexFunc(s.Approvals, func(a Approval) bool { return a.Step == step })
	if i < 0 {
		if len(s.Approvals) >= MaxApprovals {
			return fmt.Errorf("approval of step %s: the task has %d approvals already, the most status.approvals holds", step, MaxApprovals)
		}
		s.Approvals = append(s.Approvals, Approval{Step: step})
		i = len(s.Approvals) - 1
	}
	a := &s.Approvals[i]
	change(a)
	a.RunID, a.LastUpdateTime = runID, metav1.NewTime(now)
	if s.State == TaskStateInProgress {
		return s.Progress(now, runID, fmt.Sprintf("step %s %s: %s", step, a.State, a.Description))
	}
	return nil
}
