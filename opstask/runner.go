package opstask

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// runner is one execution in this controller. Writes to the task (progress,
// renewals, the final state) go through it one at a time, each guarded by
// the resourceVersion of the previous one.
type runner struct {
	c      *Controller
	kind   *Kind
	runID  string
	cancel context.CancelCauseFunc

	mu        sync.Mutex
	task      *Task     // as last written
	renewedAt time.Time // last successful write
	lost      bool
}

// launch runs t, already claimed under runID, in a goroutine, in the slot
// reserved for it.
func (c *Controller) launch(ctx context.Context, k *Kind, t *Task, runID string, resumed bool) {
	now := c.cfg.Clock.Now()
	r := &runner{c: c, kind: k, runID: runID, task: t.DeepCopy(), renewedAt: now}
	c.mu.Lock()
	c.reserved--
	c.running[t.Key()] = r
	delete(c.observed, t.Key())
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		r.run(ctx, resumed)
	}()
}

func (r *runner) run(ctx context.Context, resumed bool) {
	c := r.c
	key := r.task.Key()
	log := logr.FromContextOrDiscard(ctx).WithValues("task", key, "kind", r.kind.Name, "run", r.runID)
	defer func() {
		c.mu.Lock()
		delete(c.running, key)
		c.mu.Unlock()
		c.notify()
	}()

	execCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.cancel = cancel
	run := &Run{Task: r.task.DeepCopy(), ID: r.runID, Resumed: resumed}
	var reported atomic.Pointer[string] // the executor's last progress report
	run.progress = func(pctx context.Context, description string) error {
		if description != "" {
			reported.Store(&description)
		}
		return r.write(pctx, description)
	}

	deadline := c.deadline(r.kind, r.task)
	done := make(chan error, 1)
	log.V(1).Info("opstask execution starting", "resumed", resumed, "deadline", deadline)
	go func() { done <- r.kind.Executor.Execute(execCtx, run) }()

	renewEvery := c.cfg.LeaseDuration / 3
	renewDeadline := c.cfg.LeaseDuration * 2 / 3
	ticker := c.cfg.Clock.NewTicker(renewEvery)
	defer ticker.Stop()
	timeout := c.cfg.Clock.NewTimer(deadline.Sub(c.cfg.Clock.Now()))
	defer timeout.Stop()

	var (
		execErr  error
		timedOut bool
		abandon  <-chan time.Time // after a timeout: how long to wait for Execute
	)
wait:
	for {
		select {
		case execErr = <-done:
			break wait
		case <-timeout.C():
			timedOut = true
			cancel(ErrTimeout)
			ticker.Stop()
			t := c.cfg.Clock.NewTimer(c.cfg.LeaseDuration)
			defer t.Stop()
			abandon = t.C()
		case <-abandon:
			log.Error(nil, "opstask executor ignored its canceled context after the timeout; failing the task without waiting for it")
			execErr = context.Cause(execCtx)
			break wait
		case <-ticker.C():
			if err := r.write(ctx, ""); err != nil && !errors.Is(err, ErrLostClaim) {
				r.mu.Lock()
				late := c.cfg.Clock.Since(r.renewedAt) >= renewDeadline
				r.mu.Unlock()
				log.Info("opstask could not renew execution claim", "error", err.Error())
				if late {
					r.lose(fmt.Errorf("%w: not renewed for %s: %v", ErrLostClaim, renewDeadline, err))
				}
			}
		}
	}

	if ctx.Err() != nil {
		// The controller stops: leave the task InProgress for the next one.
		log.Info("opstask controller stopping; execution left for takeover")
		return
	}
	r.mu.Lock()
	lost := r.lost
	r.mu.Unlock()
	if lost {
		log.Info("opstask execution abandoned: claim lost", "error", execErr)
		return
	}
	now := c.cfg.Clock.Now()
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
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.task.DeepCopy()
	if err := t.Status.Transition(to, now, r.runID, desc); err != nil {
		log.Error(err, "opstask cannot finish task")
		return
	}
	if code != "" {
		t.Status.AddError(code, desc, now)
	}
	if err := c.cfg.Store.UpdateStatus(ctx, t); err != nil {
		// Conflict: someone else wrote the task (took it over); they own it.
		// Other errors: the lease runs out and a controller takes it over.
		log.Error(err, "opstask could not record the end of the execution", "state", to)
		return
	}
	r.task = t
	log.V(1).Info("opstask execution finished", "state", to)
	c.cfg.Metrics.finished(t)
}

// write renews the claim, setting the description when not empty.
func (r *runner) write(ctx context.Context, description string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lost {
		return ErrLostClaim
	}
	t := r.task.DeepCopy()
	if description == "" && t.Status.LastOperation != nil {
		description = t.Status.LastOperation.Description
	}
	now := r.c.cfg.Clock.Now()
	if err := t.Status.Progress(now, r.runID, description); err != nil {
		return err
	}
	if err := r.c.cfg.Store.UpdateStatus(ctx, t); err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			r.loseLocked(fmt.Errorf("%w: %v", ErrLostClaim, err))
			return fmt.Errorf("opstask: task %s: %w", t.Key(), ErrLostClaim)
		}
		return fmt.Errorf("opstask: renew task %s: %w", t.Key(), err)
	}
	r.task = t
	r.renewedAt = now
	return nil
}

func (r *runner) lose(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loseLocked(cause)
}

func (r *runner) loseLocked(cause error) {
	r.lost = true
	if r.cancel != nil {
		r.cancel(cause)
	}
}
