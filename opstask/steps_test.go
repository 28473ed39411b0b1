package opstask_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// stepper is a three-step executor: "plan" decides a plan, an approval
// named gate ("approve" when empty) is the gate (when gated), "act" is the
// irreversible step. Each step counts its runs; "act" blocks until
// released, or fails while failAct is set.
type stepper struct {
	gated bool
	gate  string
	plan  string

	mu      sync.Mutex
	runs    map[string]int
	failAct error
	act     chan struct{} // closed when act may finish; nil: at once
	inAct   chan struct{} // gets a value each time act starts
}

func (s *stepper) count(step string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[step]
}

func (s *stepper) Execute(ctx context.Context, run *opstask.Run) error {
	step := func(name string, do func() error) opstask.StepFunc {
		return func(ctx context.Context) (string, string, error) {
			s.mu.Lock()
			s.runs[name]++
			s.mu.Unlock()
			if err := do(); err != nil {
				return "", "", err
			}
			return name + " done", name + "-result", nil
		}
	}
	plan, err := run.Step(ctx, "plan", func(ctx context.Context) (string, string, error) {
		s.mu.Lock()
		s.runs["plan"]++
		s.mu.Unlock()
		return "decided: " + s.plan, s.plan, nil
	})
	if err != nil {
		return err
	}
	if s.gated {
		gate := s.gate
		if gate == "" {
			gate = "approve"
		}
		if err := run.Approval(ctx, gate, plan); err != nil {
			return err
		}
	}
	_, err = run.Step(ctx, "act", step("act", func() error {
		if s.inAct != nil {
			s.inAct <- struct{}{}
		}
		s.mu.Lock()
		fail, wait := s.failAct, s.act
		s.mu.Unlock()
		if wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		return fail
	}))
	if err != nil {
		return err
	}
	_, err = run.Step(ctx, "verify", step("verify", func() error { return nil }))
	return err
}

func stepStates(task *opstask.Task) string {
	var b strings.Builder
	for _, s := range task.Status.Steps {
		fmt.Fprintf(&b, "%s=%s/%d ", s.Name, s.State, s.Attempts)
	}
	return strings.TrimSpace(b.String())
}

func approvalStates(task *opstask.Task) string {
	var b strings.Builder
	for _, a := range task.Status.Approvals {
		fmt.Fprintf(&b, "%s=%s ", a.Step, a.State)
	}
	return strings.TrimSpace(b.String())
}

// A controller stopped in the middle of a step: the execution taken over
// goes on at that step (its second attempt) and does not repeat the step
// completed before it.
func TestStepsResumeAtTheFirstUnfinishedStep(t *testing.T) {
	w := newWorld(t)
	s := &stepper{plan: "p1", runs: map[string]int{}, act: make(chan struct{}), inAct: make(chan struct{}, 4)}
	kinds := []opstask.Handler{{Name: "recover", Executor: s, Resumable: true}}
	lease := 30 * time.Second
	first := w.controller(opstask.Config{Identity: "first", Handlers: kinds, LeaseDuration: lease})
	w.create("recover-1", "etcd-main", map[string]any{"recover": map[string]any{}})

	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	<-s.inAct
	stop() // the controller dies while "act" runs
	<-done
	if got := stepStates(w.get("recover-1")); got != "plan=Completed/1 act=InProgress/1" {
		t.Fatalf("steps after the first controller stopped: %s", got)
	}

	close(s.act)
	second := w.controller(opstask.Config{Identity: "second", Handlers: kinds, LeaseDuration: lease})
	w.sync(t.Context(), second)
	w.clock.Step(lease)
	w.sync(t.Context(), second)
	task := w.waitState("recover-1", opstask.TaskStateSucceeded)
	if got := stepStates(task); got != "plan=Completed/1 act=Completed/2 verify=Completed/1" {
		t.Errorf("steps after the takeover: %s, want plan once, act twice, verify once", got)
	}
	if s.count("plan") != 1 || s.count("act") != 2 || s.count("verify") != 1 {
		t.Errorf("runs: %v; want plan 1, act 2, verify 1", s.runs)
	}
	if task.Status.Steps[1].RunID == task.Status.Steps[0].RunID {
		t.Errorf("act completed by run %s, the run that stopped", task.Status.Steps[1].RunID)
	}
	stopRun(t, second)
}

// A step that failed is run again when the executor calls it again, and
// the steps completed before it are not.
func TestFailedStepIsRetriedAlone(t *testing.T) {
	w := newWorld(t)
	s := &stepper{plan: "p1", runs: map[string]int{}, failAct: errors.New("member not healthy yet")}
	retrying := opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) error {
		for attempt := 1; ; attempt++ {
			err := s.Execute(ctx, run)
			if err == nil || attempt == 3 {
				return err
			}
			if attempt == 2 {
				s.mu.Lock()
				s.failAct = nil
				s.mu.Unlock()
			}
		}
	})
	c := w.controller(opstask.Config{Handlers: []opstask.Handler{{Name: "recover", Executor: retrying, Resumable: true}}})
	w.create("recover-1", "etcd-main", map[string]any{"recover": map[string]any{}})
	w.sync(t.Context(), c)
	task := w.waitState("recover-1", opstask.TaskStateSucceeded)
	if got := stepStates(task); got != "plan=Completed/1 act=Completed/3 verify=Completed/1" {
		t.Errorf("steps: %s, want act attempted 3 times and plan once", got)
	}
	if s.count("plan") != 1 {
		t.Errorf("plan ran %d times, want once", s.count("plan"))
	}
	stopRun(t, c)
}

// The irreversible step waits, visibly, until the task carries the token
// of its plan: not at all before, not for another plan's token; once
// approved, the execution is taken over and resumed past the gate.
func TestApprovalGate(t *testing.T) {
	w := newWorld(t)
	s := &stepper{gated: true, plan: "restore from Full-1-20, losing revisions 21-25", runs: map[string]int{}}
	lease := 30 * time.Second
	c := w.controller(opstask.Config{Handlers: []opstask.Handler{{Name: "recover", Executor: s, Resumable: true}}, LeaseDuration: lease})
	w.create("recover-1", "etcd-main", map[string]any{"recover": map[string]any{}})
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { stop(); <-done }()

	token := opstask.ApprovalToken("approve", s.plan)
	waitFor(t, func() bool {
		task := w.get("recover-1")
		return stepStates(task) == "plan=Completed/1" && approvalStates(task) == "approve=AwaitingApproval"
	})
	task := w.get("recover-1")
	if d := task.Status.LastOperation.Description; !strings.Contains(d, s.plan) || !strings.Contains(d, token) {
		t.Errorf("lastOperation while waiting: %q; want the plan and the token %s", d, token)
	}
	if a := task.Status.Approvals[0]; a.Token != token || !strings.Contains(a.Description, s.plan) {
		t.Errorf("approval awaited: %+v; want its token %s and the plan", a, token)
	}
	// Time passes; renewals keep the claim; nothing irreversible happens.
	for range 4 {
		w.clock.Step(lease / 3)
		w.waitRenewed("recover-1")
	}
	if s.count("act") != 0 || w.get("recover-1").State() != opstask.TaskStateInProgress {
		t.Fatalf("act ran %d times before approval", s.count("act"))
	}

	// An approval of another plan does not count.
	other := opstask.ApprovalToken("approve", "restore from Full-1-10")
	if err := w.store.Approve(t.Context(), "ns", "recover-1", other); err != nil {
		t.Fatal(err)
	}
	for range 6 { // the claim is lost at the next renewal; a takeover follows a lease later
		w.clock.Step(lease / 3)
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, func() bool {
		a := w.get("recover-1").Status.Approvals
		return len(a) == 1 && a[0].State == opstask.ApprovalStateAwaiting && a[0].RunID != task.Status.Approvals[0].RunID
	})
	if s.count("act") != 0 {
		t.Fatalf("act ran with the approval of another plan")
	}

	if err := w.store.Approve(t.Context(), "ns", "recover-1", token); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		w.clock.Step(lease / 3)
		time.Sleep(5 * time.Millisecond)
		return w.get("recover-1").State() == opstask.TaskStateSucceeded
	})
	got := w.get("recover-1")
	if st := stepStates(got); st != "plan=Completed/1 act=Completed/1 verify=Completed/1" {
		t.Errorf("steps: %s", st)
	}
	if a := got.Status.Approvals; approvalStates(got) != "approve=Approved" || !strings.HasPrefix(a[0].Description, "approved ("+token+")") {
		t.Errorf("approval recorded as %+v", a)
	}
	if s.count("plan") != 1 || s.count("act") != 1 {
		t.Errorf("runs %v; want plan and act once", s.runs)
	}
}

// An approval named after the step it gates — Approval(ctx, "act", plan),
// then Step(ctx, "act", ...), as "approved plan for step" reads — gates
// that step: the step waits for the approval, then runs exactly once, and
// the task succeeds only after it ran. Approvals are recorded apart from
// steps, so the step never reads the approval's record as its own.
func TestApprovalOfTheStepItGates(t *testing.T) {
	w := newWorld(t)
	s := &stepper{gated: true, gate: "act", plan: "upload 3 backups to the new store", runs: map[string]int{}}
	lease := 30 * time.Second
	kinds := []opstask.Handler{{Name: "recover", Executor: s, Resumable: true}}
	first := w.controller(opstask.Config{Identity: "first", Handlers: kinds, LeaseDuration: lease})
	w.create("recover-1", "etcd-main", map[string]any{"recover": map[string]any{}})
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()

	token := opstask.ApprovalToken("act", s.plan)
	waitFor(t, func() bool {
		lo := w.get("recover-1").Status.LastOperation
		return lo != nil && strings.Contains(lo.Description, "awaiting approval") && strings.Contains(lo.Description, token)
	})
	// The controller that waits stops (as an approval in a Kubernetes
	// store ends its claim); the approval comes; another controller takes
	// the execution over and resumes it past the gate.
	stop()
	<-done
	if s.count("act") != 0 {
		t.Fatalf("act ran %d times before approval", s.count("act"))
	}
	if err := w.store.Approve(t.Context(), "ns", "recover-1", token); err != nil {
		t.Fatal(err)
	}
	second := w.controller(opstask.Config{Identity: "second", Handlers: kinds, LeaseDuration: lease})
	w.sync(t.Context(), second)
	w.clock.Step(lease)
	w.sync(t.Context(), second)
	got := w.waitState("recover-1", opstask.TaskStateSucceeded)
	if s.count("act") != 1 {
		t.Fatalf("act ran %d times; want exactly once, after the approval (runs %v, steps %s)", s.count("act"), s.runs, stepStates(got))
	}
	if st := stepStates(got); st != "plan=Completed/1 act=Completed/1 verify=Completed/1" {
		t.Errorf("steps: %s", st)
	}
	if a := approvalStates(got); a != "act=Approved" {
		t.Errorf("approvals: %s, want act=Approved", a)
	}
	if r, ok := (&opstask.Run{Task: got}).StepResult("act"); !ok || r != "act-result" {
		t.Errorf("act's recorded result %q, %v; want its own, not the approval's token", r, ok)
	}
	stopRun(t, second)
}

// A Run outside a controller (an executor's unit test) keeps its steps in
// its Task's status.
func TestStepsWithoutController(t *testing.T) {
	run := &opstask.Run{Task: &opstask.Task{Name: "t"}, ID: "r"}
	n := 0
	for range 2 {
		got, err := run.Step(t.Context(), "once", func(context.Context) (string, string, error) { n++; return "did", "42", nil })
		if err != nil || got != "42" {
			t.Fatalf("Step: %q, %v", got, err)
		}
	}
	if n != 1 {
		t.Errorf("a completed step ran %d times", n)
	}
	if r, ok := run.StepResult("once"); !ok || r != "42" {
		t.Errorf("StepResult: %q %v", r, ok)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

func stopRun(t *testing.T, c *opstask.Controller) {
	ctx, stop := context.WithCancel(t.Context())
	stop()
	_ = c.Run(ctx) // waits for its executions
}
