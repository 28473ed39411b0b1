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
	run := &Run{Task: task.DeepCopy(), ID: l.runID, Resumed: resumed}
	var reported atomic.Pointer[string] // the executor's last progress report
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

	deadline := c.deadline(r.kind, task)
	timeout := c.cfg.Clock.NewTimer(deadline.Sub(c.cfg.Clock.Now()))
	defer timeout.Stop()
	stopRenewing := l.keep(ctx, cancel, func(t *Task, now time.Time) error {
		return t.Status.Progress(now, l.runID, descriptionOr(t, ""))
	})
	renewing := true
	defer func() {
		if renewing {
			stopRenewing()
		}
	}()

	done := make(chan error, 1)
	log.V(1).Info("opstask execution starting", "resumed", resumed, "deadline", deadline)
	go func() { done <- r.kind.Executor.Execute(execCtx, run) }()

	var (
		execErr  error
		timedOut bool
		abandon  <-chan time.Time // after a timeout: how long to wait for Execute
	)
wait:
	for {
		select {
		case execErr = <-done:
			returned = true
			break wait
		case <-timeout.C():
			timedOut = true
			cancel(ErrTimeout)
			t := c.cfg.Clock.NewTimer(c.cfg.LeaseDuration)
			defer t.Stop()
			abandon = t.C()
		case <-abandon:
			log.Error(nil, "opstask executor ignored its canceled context after the timeout; failing the task without waiting for it")
			execErr = context.Cause(execCtx)
			break wait
		}
	}
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
	to, code, desc := TaskStateSucceeded, ErrorCode(""), "execution completed"
	if p := reported.Load(); p != nil {
		// The outcome the executor reported last: what it did.
		desc = *p
	}
	switch {
	case timedOut || errors.Is(context.Cause(execCtx), ErrTimeout):
		to, code = TaskStateFailed, CodeTimeout
		desc = fmt.Sprintf("%v: timeout passed at %s", ErrTimeout, deadline.UTC().Format(time.RFC3339))
		if execErr != nil && !errors.Is(execErr, context.Canceled) && !errors.Is(execErr, ErrTimeout) {
			desc += ": " + execErr.Error()
		}
	case execErr != nil:
		to, code, desc = TaskStateFailed, codeOf(execErr, CodeExecutionFailed), execErr.Error()
	}
	err := l.write(ctx, func(t *Task, now time.Time) error {
		if err := t.Status.Transition(to, now, l.runID, desc); err != nil {
			return err
		}
		if code != "" {
			t.Status.AddError(code, desc, now)
		}
		return nil
	})
	if err != nil {
		// Lost claim: someone else wrote the task (took it over); they own
		// it. Other errors: the lease runs out and a controller takes it
		// over.
		log.Error(err, "opstask could not record the end of the execution", "state", to)
		return
	}
	log.V(1).Info("opstask execution finished", "state", to)
	c.recordFinished(l.last())
}

// descriptionOr returns description, or when it is empty the description
// of t's last operation, which a renewal keeps.
func descriptionOr(t *Task, description string) string {
	if description == "" && t.Status.LastOperation != nil {
		return t.Status.LastOperation.Description
	}
	return description
}
