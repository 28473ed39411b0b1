package opstask

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// runner is one execution in this controller. Writes to the task (progress,
// renewals, the final state) go through its lease one at a time, each
// guarded by the resourceVersion of the previous one and bounded by the
// claim's deadline.
type runner struct {
	c     *Controller
	kind  *Handler
	lease *lease
	// target is the task's TargetKey.
	target string
	// execCtx is the executor's context; cancel cancels it with a cause:
	// the lease's watchdog, a timeout, or stop.
	execCtx context.Context
	cancel  context.CancelCauseFunc
}

// stop cancels the execution with cause, at once: the end of run triggers
// another Sync.
func (r *runner) stop(cause error) { r.cancel(cause) }

// launch runs the task of l, already claimed and held, in a goroutine, in
// the slot reserved for it.
func (c *Controller) launch(ctx context.Context, k *Handler, l *lease, resumed bool) {
	execCtx, cancel := context.WithCancelCause(ctx)
	r := &runner{c: c, kind: k, lease: l, target: l.task.TargetKey(), execCtx: execCtx, cancel: cancel}
	key := l.task.Key()
	c.mu.Lock()
	c.reserved--
	c.running[key] = r
	delete(c.observed, key)
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		r.run(ctx, resumed)
	}()
}

func (r *runner) run(ctx context.Context, resumed bool) {
	c := r.c
	l := r.lease
	task := l.last()
	key := task.Key()
	log := logr.FromContextOrDiscard(ctx).WithValues("task", key, "kind", r.kind.Name, "run", l.runID)
	ctx = logr.NewContext(ctx, log)
	returned := false // the executor returned
	defer func() {
		c.mu.Lock()
		delete(c.running, key)
		if returned {
			// A hold on the task, if its deletion was requested, may be
			// released at once: nothing of this run acts any more.
			c.returned[key] = l.runID
		}
		c.mu.Unlock()
		c.notify()
	}()

	execCtx, cancel := r.execCtx, r.cancel
	defer cancel(nil)
	run, reported := r.newRun(task, resumed)
	deadline := c.deadline(r.kind, task)
	stopRenewing := l.keep(ctx, cancel, func(t *Task, now time.Time) error {
		return t.Status.Progress(now, l.runID, descriptionOr(t, ""))
	})
	renewing := true
	defer func() {
		if renewing {
			stopRenewing()
		}
	}()

	log.V(1).Info("opstask execution starting", "resumed", resumed, "deadline", deadline)
	timedOut, returned, execErr := r.await(ctx, run, deadline)
	// The final write goes through the lease like the renewals; no renewal
	// may overtake it.
	stopRenewing()
	renewing = false

	if ctx.Err() != nil {
		// The controller stops: leave the task InProgress for the next one.
		log.Info("opstask controller stopping; execution left for takeover")
		return
	}
	if errors.Is(context.Cause(execCtx), ErrDeleted) {
		log.Info("opstask execution stopped: the task's deletion was requested", "error", execErr)
		return
	}
	if l.isLost() {
		log.Info("opstask execution abandoned: claim lost", "error", execErr, "cause", context.Cause(execCtx))
		return
	}
	r.finish(ctx, outcomeOf(execErr, timedOut || errors.Is(context.Cause(execCtx), ErrTimeout), deadline, reported.Load()))
}

// newRun returns the Run handed to the executor, and where its progress
// reports are kept (the last one describes the outcome).
func (r *runner) newRun(task *Task, resumed bool) (*Run, *atomic.Pointer[string]) {
	l := r.lease
	run := &Run{Task: task.DeepCopy(), ID: l.runID, Resumed: resumed}
	reported := new(atomic.Pointer[string]) // the executor's last progress report
	run.progress = func(pctx context.Context, description string) error {
		if description != "" {
			reported.Store(&description)
		}
		return l.write(pctx, func(t *Task, now time.Time) error {
			return t.Status.Progress(now, l.runID, descriptionOr(t, description))
		})
	}
	run.record = func(rctx context.Context, change func(*Status, time.Time) error) (*Status, error) {
		err := l.write(rctx, func(t *Task, now time.Time) error { return change(&t.Status, now) })
		if err != nil {
			return nil, err
		}
		st := l.last().Status
		return &st, nil
	}
	return run, reported
}

// await runs the executor and waits for it to return. At the deadline it
// cancels the execution (ErrTimeout) and waits one more lease duration; an
// executor that ignores its canceled context is then abandoned (returned
// false).
func (r *runner) await(ctx context.Context, run *Run, deadline time.Time) (timedOut, returned bool, execErr error) {
	c := r.c
	timeout := c.cfg.Clock.NewTimer(deadline.Sub(c.cfg.Clock.Now()))
	defer timeout.Stop()
	done := make(chan error, 1)
	go func() { done <- r.kind.Executor.Execute(r.execCtx, run) }()
	var abandon <-chan time.Time // after a timeout: how long to wait for Execute
	for {
		select {
		case execErr = <-done:
			return timedOut, true, execErr
		case <-timeout.C():
			timedOut = true
			r.cancel(ErrTimeout)
			t := c.cfg.Clock.NewTimer(c.cfg.LeaseDuration)
			defer t.Stop()
			abandon = t.C()
		case <-abandon:
			logr.FromContextOrDiscard(ctx).Error(nil, "opstask executor ignored its canceled context after the timeout; failing the task without waiting for it")
			return timedOut, false, context.Cause(r.execCtx)
		}
	}
}

// outcome is the end state an execution is recorded with.
type outcome struct {
	state TaskState
	code  ErrorCode
	desc  string
}

// outcomeOf decides how an execution ends: Succeeded, described by the
// executor's last progress report; Failed with CodeTimeout when the
// deadline passed; Failed with the error's code otherwise.
func outcomeOf(execErr error, timedOut bool, deadline time.Time, reported *string) outcome {
	o := outcome{state: TaskStateSucceeded, desc: "execution completed"}
	if reported != nil {
		// The outcome the executor reported last: what it did.
		o.desc = *reported
	}
	switch {
	case timedOut:
		o.state, o.code = TaskStateFailed, CodeTimeout
		o.desc = fmt.Sprintf("%v: timeout passed at %s", ErrTimeout, deadline.UTC().Format(time.RFC3339))
		if execErr != nil && !errors.Is(execErr, context.Canceled) && !errors.Is(execErr, ErrTimeout) {
			o.desc += ": " + execErr.Error()
		}
	case execErr != nil:
		o.state, o.code, o.desc = TaskStateFailed, codeOf(execErr, CodeExecutionFailed), execErr.Error()
	}
	return o
}

// finish records the execution's outcome through the lease.
func (r *runner) finish(ctx context.Context, o outcome) {
	l := r.lease
	log := logr.FromContextOrDiscard(ctx)
	err := l.write(ctx, func(t *Task, now time.Time) error {
		if err := t.Status.Transition(o.state, now, l.runID, o.desc); err != nil {
			return err
		}
		if o.code != "" {
			t.Status.AddError(o.code, o.desc, now)
		}
		return nil
	})
	if err != nil {
		// Lost claim: someone else wrote the task (took it over); they own
		// it. Other errors: the lease runs out and a controller takes it
		// over.
		log.Error(err, "opstask could not record the end of the execution", "state", o.state)
		return
	}
	log.V(1).Info("opstask execution finished", "state", o.state)
	r.c.recordFinished(l.last())
}

// descriptionOr returns description, or when it is empty the description
// of t's last operation, which a renewal keeps.
func descriptionOr(t *Task, description string) string {
	if description == "" && t.Status.LastOperation != nil {
		return t.Status.LastOperation.Description
	}
	return description
}
