package opstask

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// errWriteDeadline is the cause of a write's context canceled because the
// claim it would renew is no longer confirmed.
var errWriteDeadline = errors.New("opstask: the claim was not confirmed within 2/3 of the lease; write abandoned")

// lease is this controller's claim on one task: an execution (state
// InProgress) or a cleanup (lastOperation Cleanup/InProgress). Another
// controller takes the task over when nobody wrote it for LeaseDuration,
// counted from when it sees the task's current version, which is never
// before the start of the write that made that version. So the holder
// counts its claim as confirmed until 2/3 of the lease after the start of
// its last successful write, and no longer:
//
//   - every write through the lease has that instant as its deadline (on
//     the controller's clock), so no write outlives the claim it renews;
//   - a watchdog, a timer that does not wait for any write to return,
//     cancels the work with cause ErrLostClaim when the instant passes;
//   - a write that conflicts (someone else wrote the task) or finds the
//     task gone cancels the work at once.
//
// After the claim is lost, the lease writes nothing more.
type lease struct {
	c     *Controller
	runID string

	writeMu sync.Mutex // one write at a time, each on the version of the previous

	mu          sync.Mutex
	task        *Task     // as last written
	confirmedAt time.Time // start of the last successful write
	lost        bool
	cancel      context.CancelCauseFunc // cancels the work, once keep runs
}

// newLease returns a lease on t for runID, not yet written: its first write
// claims the task, with a deadline of 2/3 of the lease from now.
func (c *Controller) newLease(t *Task, runID string) *lease {
	return &lease{c: c, runID: runID, task: t.DeepCopy(), confirmedAt: c.cfg.Clock.Now()}
}

// renewDeadline is how long after the start of its last successful write a
// controller counts its claim as confirmed.
func (c *Controller) renewDeadline() time.Duration { return c.cfg.LeaseDuration * 2 / 3 }

// write changes the task with change (given a copy as last written and the
// time of the write) and writes its status, guarded by the resourceVersion
// of the previous write and bounded by the claim's deadline.
func (l *lease) write(ctx context.Context, change func(t *Task, now time.Time) error) error {
	return l.do(ctx, "write status of", change, l.c.cfg.Store.UpdateStatus)
}

// delete deletes the task, guarded by its UID and the resourceVersion of
// the last write, and bounded by the claim's deadline.
func (l *lease) delete(ctx context.Context) error {
	return l.do(ctx, "delete", nil, l.c.cfg.Store.Delete)
}

func (l *lease) do(ctx context.Context, what string, change func(*Task, time.Time) error, op func(context.Context, *Task) error) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	if l.lost {
		l.mu.Unlock()
		return fmt.Errorf("opstask: task %s: %w", l.task.Key(), ErrLostClaim)
	}
	t := l.task.DeepCopy()
	deadline := l.confirmedAt.Add(l.c.renewDeadline())
	l.mu.Unlock()

	now := l.c.cfg.Clock.Now()
	if change != nil {
		if err := change(t, now); err != nil {
			return err
		}
	}
	wctx, done := withDeadline(ctx, l.c.cfg.Clock, deadline)
	err := op(wctx, t)
	done()

	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			l.loseLocked(fmt.Errorf("%w: %v", ErrLostClaim, err))
			return fmt.Errorf("opstask: task %s: %w", t.Key(), ErrLostClaim)
		}
		return fmt.Errorf("opstask: %s task %s: %w", what, t.Key(), err)
	}
	if l.lost {
		// The write landed after the watchdog gave the claim up: the work
		// is canceled already, and another controller will take over
		// LeaseDuration after this write at the earliest.
		return fmt.Errorf("opstask: task %s: %w", t.Key(), ErrLostClaim)
	}
	l.task = t
	l.confirmedAt = now
	if l.c.confirmed != nil {
		l.c.confirmed(t.Key(), now)
	}
	return nil
}

// last returns a copy of the task as last written.
func (l *lease) last() *Task {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.task.DeepCopy()
}

func (l *lease) isLost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

func (l *lease) loseLocked(cause error) {
	if l.lost {
		return
	}
	l.lost = true
	if l.cancel != nil {
		l.cancel(cause)
	}
}

// keep holds the claim while the work canceled by cancel runs: it renews
// every LeaseDuration/3 with renew, and cancels the work with cause
// ErrLostClaim when the claim is lost (see lease). The returned stop ends
// renewing and waits for a renewal in flight (bounded by its deadline).
func (l *lease) keep(ctx context.Context, cancel context.CancelCauseFunc, renew func(t *Task, now time.Time) error) (stop func()) {
	c := l.c
	log := logr.FromContextOrDiscard(ctx).WithValues("task", l.task.Key(), "run", l.runID)
	l.mu.Lock()
	l.cancel = cancel
	if l.lost {
		cancel(fmt.Errorf("%w: before the work started", ErrLostClaim))
	}
	left := l.confirmedAt.Add(c.renewDeadline()).Sub(c.cfg.Clock.Now())
	l.mu.Unlock()
	ticker := c.cfg.Clock.NewTicker(c.cfg.LeaseDuration / 3)
	watchdog := c.cfg.Clock.NewTimer(max(left, 0))
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer watchdog.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-watchdog.C():
			}
			l.mu.Lock()
			left := l.confirmedAt.Add(c.renewDeadline()).Sub(c.cfg.Clock.Now())
			if left <= 0 && !l.lost {
				log.Info("opstask claim not confirmed within 2/3 of the lease; canceling", "lastConfirmed", l.confirmedAt)
				l.loseLocked(fmt.Errorf("%w: no write confirmed it for %s", ErrLostClaim, c.renewDeadline()))
			}
			lost := l.lost
			l.mu.Unlock()
			if lost {
				return
			}
			watchdog.Reset(left)
		}
	}()
	go func() {
		defer wg.Done()
		defer ticker.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-ticker.C():
			}
			err := l.write(ctx, renew)
			if errors.Is(err, ErrLostClaim) {
				log.Info("opstask claim lost", "error", err.Error())
				return
			}
			if err != nil {
				log.Info("opstask could not renew claim", "error", err.Error())
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// withDeadline returns a context canceled, with cause errWriteDeadline, at
// deadline on clk; done releases its resources.
func withDeadline(ctx context.Context, clk clock.WithTicker, deadline time.Time) (context.Context, func()) {
	if _, real := clk.(clock.RealClock); real {
		wctx, cancel := context.WithDeadlineCause(ctx, deadline, errWriteDeadline)
		return wctx, cancel
	}
	wctx, cancel := context.WithCancelCause(ctx)
	d := deadline.Sub(clk.Now())
	if d <= 0 {
		cancel(errWriteDeadline)
		return wctx, func() {}
	}
	timer := clk.NewTimer(d)
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		defer timer.Stop()
		select {
		case <-timer.C():
			cancel(errWriteDeadline)
		case <-stop:
		case <-wctx.Done():
		}
	}()
	return wctx, func() {
		close(stop)
		<-finished
		cancel(nil)
	}
}
