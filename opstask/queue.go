package opstask

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// A job is one independent action of a Sync: it returns when the next Sync
// is due for it by time alone (zero: never) and its error.
type job func() (time.Time, error)

// queueJobs groups tasks by target and returns one job per queue. Slots are
// reserved here, before any job runs: queues whose oldest unfinished task
// is older get free slots first.
func (c *Controller) queueJobs(ctx context.Context, tasks []*Task, now time.Time) []job {
	queues := map[string][]*Task{}
	var order []string
	for _, t := range tasks {
		k := t.TargetKey()
		if _, ok := queues[k]; !ok {
			order = append(order, k)
		}
		queues[k] = append(queues[k], t)
	}
	for _, q := range queues {
		SortTasks(q)
	}
	sort.Slice(order, func(i, j int) bool {
		return oldestUnfinished(queues[order[i]]).Before(oldestUnfinished(queues[order[j]]))
	})
	jobs := make([]job, 0, len(order))
	busy := c.busyTargets()
	for _, k := range order {
		q := queues[k]
		slot := !busy[k] && needsSlot(q) && c.reserveSlot()
		jobs = append(jobs, func() (time.Time, error) { return c.syncQueue(ctx, q, now, slot) })
	}
	return jobs
}

// runJobs runs jobs on up to syncWorkers goroutines and returns the
// earliest time one of them is due again (zero: none) and their errors,
// joined.
func runJobs(jobs []job) (time.Time, error) {
	var (
		mu   sync.Mutex
		next time.Time
		errs []error
		wg   sync.WaitGroup
	)
	work := make(chan job)
	for range min(syncWorkers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				at, err := j()
				mu.Lock()
				if !at.IsZero() && (next.IsZero() || at.Before(next)) {
					next = at
				}
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
	return next, errors.Join(errs...)
}

// busyTargets returns the target keys of the executions this controller
// runs: their queues take no slot even when the tasks read show them
// pending (a cache that has not yet delivered the claim).
func (c *Controller) busyTargets() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	busy := make(map[string]bool, len(c.running))
	for _, r := range c.running {
		busy[r.target] = true
	}
	return busy
}

// oldestUnfinished returns the first unfinished task of a sorted queue, or
// its last task when all are finished.
func oldestUnfinished(q []*Task) *Task {
	for _, t := range q {
		if !t.State().Finished() {
			return t
		}
	}
	return q[len(q)-1]
}

// needsSlot reports whether a queue may start a task: it has a pending task
// and none in progress.
func needsSlot(q []*Task) bool {
	pending := false
	for _, t := range q {
		switch t.State() {
		case TaskStateInProgress:
			return false
		case TaskStatePending:
			pending = pending || !t.Deleting
		}
	}
	return pending
}

// syncQueue acts on one target's queue, sorted, with an execution slot
// reserved for it if slot is set. It returns when to look again because of
// time alone.
func (c *Controller) syncQueue(ctx context.Context, q []*Task, now time.Time, slot bool) (time.Time, error) {
	if slot {
		defer func() {
			if slot {
				c.releaseSlot() // not handed to start
			}
		}()
	}
	pending, busy, err := c.screen(ctx, q, now)
	if err != nil {
		return time.Time{}, err
	}
	next, err := c.checkExecutions(ctx, q, now)
	if err != nil || busy {
		return next, err
	}
	at, err := c.startHead(ctx, pending, now, &slot)
	if !at.IsZero() && (next.IsZero() || at.Before(next)) {
		next = at
	}
	return next, err
}

// screen rejects the invalid specs and the duplicates wherever they are in
// the queue (both are properties of the queue, not of the target's state),
// releases the leftover hold of a pending task being deleted, and returns
// the pending tasks that may start, in order, and whether one is in
// progress.
func (c *Controller) screen(ctx context.Context, q []*Task, now time.Time) (pending []*Task, busy bool, err error) {
	type seenKey struct{ kind, key string }
	unfinished := map[seenKey]string{} // duplicate key -> first task name
	for _, t := range q {
		switch t.State() {
		case TaskStateInProgress:
			busy = true
			if k, key, err := c.kindAndKey(t); err == nil && !k.AllowDuplicates {
				if _, ok := unfinished[seenKey{k.Name, key}]; !ok {
					unfinished[seenKey{k.Name, key}] = t.Name
				}
			}
		case TaskStatePending:
			if t.Deleting {
				// Never started; a hold on it is a leftover.
				if t.Held {
					if err := c.release(ctx, t); err != nil {
						return nil, false, err
					}
				}
				continue
			}
			k, key, err := c.kindAndKey(t)
			if err != nil {
				if rerr := c.reject(ctx, t, now, codeOf(err, CodeInvalidSpec), err.Error()); rerr != nil {
					return nil, false, rerr
				}
				continue
			}
			if !k.AllowDuplicates {
				sk := seenKey{k.Name, key}
				if first, ok := unfinished[sk]; ok {
					msg := fmt.Sprintf("duplicate of unfinished task %s (kind %s) for the same target", first, k.Name)
					if rerr := c.reject(ctx, t, now, CodeDuplicate, msg); rerr != nil {
						return nil, false, rerr
					}
					continue
				}
				unfinished[sk] = t.Name
			}
			pending = append(pending, t)
		}
	}
	return pending, busy, nil
}

// checkExecutions looks at the queue's executions: a deleted one is stopped
// and released, and one that another controller started is taken over when
// its claim lapsed. It returns when to look again because of time alone.
func (c *Controller) checkExecutions(ctx context.Context, q []*Task, now time.Time) (time.Time, error) {
	var next time.Time
	for _, t := range q {
		if t.State() != TaskStateInProgress {
			continue
		}
		check := c.checkForeign
		if t.Deleting {
			check = c.stopDeleted
		}
		at, err := check(ctx, t, now)
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
		if err != nil {
			return next, err
		}
	}
	return next, nil
}

// startHead admits and starts the head of the pending tasks; heads whose
// precondition fails for good are rejected and make way. *slot says whether
// an execution slot is reserved for the queue; start takes it over (and
// *slot is then false). It returns when to look again because of time
// alone.
func (c *Controller) startHead(ctx context.Context, pending []*Task, now time.Time, slot *bool) (time.Time, error) {
	for _, t := range pending {
		if c.cfg.Settle > 0 {
			if ready := t.CreationTimestamp.Add(time.Second + c.cfg.Settle); now.Before(ready) {
				return ready, nil
			}
		}
		if !*slot {
			return time.Time{}, nil // a finishing execution triggers another Sync
		}
		k, _, _ := c.kindAndKey(t)
		err := c.admit(ctx, k, t)
		if errors.Is(err, ErrUnmet) || errors.Is(err, ErrInvalidSpec) {
			// A spec a precondition cannot use is rejected too: checking it
			// again would block the queue for good.
			code := CodePreconditionFailed
			if !errors.Is(err, ErrUnmet) {
				code = CodeInvalidSpec
			}
			if rerr := c.reject(ctx, t, now, codeOf(err, code), err.Error()); rerr != nil {
				return time.Time{}, rerr
			}
			continue
		}
		if err != nil {
			logr.FromContextOrDiscard(ctx).Info("opstask precondition could not be checked; retrying", "task", t.Key(), "error", err.Error())
			return now.Add(c.cfg.RetryInterval), nil
		}
		*slot = false // start takes the reservation over
		return time.Time{}, c.start(ctx, k, t)
	}
	return time.Time{}, nil
}

func (c *Controller) kindAndKey(t *Task) (*Handler, string, error) {
	name, raw, err := t.Spec.Member()
	if err != nil {
		return nil, "", err
	}
	k := c.kinds[name]
	if k == nil {
		return nil, "", fmt.Errorf("%w: spec.config.%s: no such task kind is registered", ErrInvalidSpec, name)
	}
	key, err := k.dupKey(t, raw)
	if err != nil {
		return nil, "", WithCode(CodeInvalidSpec, err)
	}
	return k, key, nil
}

// admit checks the preconditions of k in order. Their error is returned as
// it is: it becomes the task's lastErrors message, which is for people; the
// log says which precondition it was.
func (c *Controller) admit(ctx context.Context, k *Handler, t *Task) error {
	for i, p := range k.Preconditions {
		if err := p.Check(ctx, t.DeepCopy()); err != nil {
			logr.FromContextOrDiscard(ctx).V(1).Info("opstask precondition failed", "task", t.Key(), "kind", k.Name, "precondition", i, "error", err.Error())
			return err
		}
	}
	return nil
}

// reject moves a pending task to Rejected.
func (c *Controller) reject(ctx context.Context, t *Task, now time.Time, code ErrorCode, msg string) error {
	runID := c.newRunID()
	if err := t.Status.Transition(TaskStateRejected, now, runID, "rejected: "+msg); err != nil {
		return err
	}
	t.Status.AddError(code, msg, now)
	if err := c.cfg.Store.UpdateStatus(ctx, t); err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			c.notify()
			return nil
		}
		return fmt.Errorf("opstask: reject task %s: %w", t.Key(), err)
	}
	logr.FromContextOrDiscard(ctx).Info("opstask task rejected", "task", t.Key(), "code", code, "reason", msg)
	c.recordFinished(t)
	return nil
}

// reserveSlot reserves an execution slot, if one is free, for a start or a
// takeover; launch turns the reservation into a running execution and
// releaseSlot gives it back.
func (c *Controller) reserveSlot() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.running)+c.reserved >= c.cfg.MaxConcurrent {
		return false
	}
	c.reserved++
	return true
}

func (c *Controller) releaseSlot() {
	c.mu.Lock()
	c.reserved--
	c.mu.Unlock()
}

// start claims a pending task (Pending → InProgress, guarded by its
// resourceVersion) and runs it in the slot reserved for it. The claim is the
// lease's first write, so it has the lease's deadline too: a claim that
// takes longer than 2/3 of the lease is given up, not run.
func (c *Controller) start(ctx context.Context, k *Handler, t *Task) error {
	runID := c.newRunID()
	started, err := t.startedWith()
	if err != nil {
		c.releaseSlot()
		return fmt.Errorf("opstask: start task %s: %w", t.Key(), err)
	}
	l := c.newLease(t, runID)
	err = l.write(ctx, func(t *Task, now time.Time) error {
		if err := t.Status.Transition(TaskStateInProgress, now, runID, "execution started"); err != nil {
			return err
		}
		// What a takeover checks the spec against (checkStartedWith):
		// written with the claim, guarded by the version the
		// preconditions were checked on.
		t.Status.StartedWith = started
		return nil
	})
	if err != nil {
		c.releaseSlot()
		if errors.Is(err, ErrLostClaim) {
			c.notify() // another controller got there first: look again
			return nil
		}
		return fmt.Errorf("opstask: start task %s: %w", t.Key(), err)
	}
	if err := c.hold(ctx, l); err != nil {
		c.releaseSlot()
		if errors.Is(err, ErrLostClaim) {
			c.notify()
			return nil
		}
		return fmt.Errorf("opstask: start task %s: %w", t.Key(), err)
	}
	c.launch(ctx, k, l, false)
	return nil
}

// hold puts the execution hold on the task of l, which l has just claimed,
// through l: the executor may run only while the task is held, so that a
// request to delete it leaves it at the head of its queue until the
// executor has returned. A hold that cannot be written leaves the claim to
// lapse (a lost claim triggers another Sync at once): no executor runs, and
// a controller takes the execution over after LeaseDuration. Errors wrap
// ErrLostClaim when the task changed or is gone.
func (c *Controller) hold(ctx context.Context, l *lease) error {
	if l.last().Held {
		return nil
	}
	return l.do(ctx, "hold", nil, func(ctx context.Context, t *Task) error {
		return c.cfg.Store.SetHeld(ctx, t, true)
	})
}

// release removes the execution hold from t, at its current version, once
// no executor of t can be running; a task whose deletion was requested is
// then deleted.
func (c *Controller) release(ctx context.Context, t *Task) error {
	if err := c.cfg.Store.SetHeld(ctx, t, false); err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			c.notify()
			return nil
		}
		return fmt.Errorf("opstask: release hold on task %s: %w", t.Key(), err)
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("opstask hold released", "task", t.Key(), "state", t.State(), "deleting", t.Deleting)
	return nil
}

// stopDeleted handles an InProgress task whose deletion was requested. Its
// target stays busy until the task is gone, and its hold is released only
// when no executor of it can be running: this controller stops its own
// execution (cause ErrDeleted) and releases the hold once the executor has
// returned; an execution by another controller is released when nobody
// wrote the task for LeaseDuration, as a takeover would be, since that
// controller's watchdog has canceled it by then. The task is never resumed.
func (c *Controller) stopDeleted(ctx context.Context, t *Task, now time.Time) (time.Time, error) {
	c.mu.Lock()
	r := c.running[t.Key()]
	returned := c.returned[t.Key()]
	c.mu.Unlock()
	if r != nil {
		r.stop(ErrDeleted) // the end of its run triggers another Sync
		return time.Time{}, nil
	}
	if !t.Held {
		// Held by someone else's finalizer only: nothing of ours to release.
		return time.Time{}, nil
	}
	if lo := t.Status.LastOperation; lo == nil || lo.RunID != returned {
		if expires := c.leaseExpiry(t, now); now.Before(expires) {
			return expires, nil
		}
		logr.FromContextOrDiscard(ctx).Info("opstask releasing a deleted task whose run stopped renewing", "task", t.Key())
	}
	return time.Time{}, c.release(ctx, t)
}

// checkForeign handles an InProgress task this controller does not run: it
// takes the execution over when nobody wrote the task for LeaseDuration, and
// fails it when its timeout has passed.
func (c *Controller) checkForeign(ctx context.Context, t *Task, now time.Time) (time.Time, error) {
	c.mu.Lock()
	if c.running[t.Key()] != nil {
		c.mu.Unlock()
		return time.Time{}, nil
	}
	c.mu.Unlock()
	if expires := c.leaseExpiry(t, now); now.Before(expires) {
		return expires, nil
	}
	if !c.reserveSlot() {
		return now.Add(c.cfg.RetryInterval), nil
	}
	prev := ""
	if t.Status.LastOperation != nil {
		prev = t.Status.LastOperation.RunID
	}
	k, _, err := c.kindAndKey(t)
	runID := c.newRunID()
	var fail error
	switch changed := checkStartedWith(t); {
	case changed != nil:
		// Before anything else: a kind or config put in since the start
		// is never resumed, whatever it is.
		fail = changed
	case err != nil:
		fail = err
	case c.deadline(k, t).Compare(now) <= 0:
		fail = WithCode(CodeTimeout, fmt.Errorf("%w: run %s stopped renewing and the timeout has passed", ErrTimeout, prev))
	case !k.Resumable:
		fail = WithCode(CodeInterrupted, fmt.Errorf("%w: run %s stopped renewing for %s", ErrInterrupted, prev, c.cfg.LeaseDuration))
	}
	if fail != nil {
		c.releaseSlot()
		if err := t.Status.Transition(TaskStateFailed, now, runID, fail.Error()); err != nil {
			return time.Time{}, err
		}
		t.Status.AddError(codeOf(fail, CodeInvalidSpec), fail.Error(), now)
		if err := c.cfg.Store.UpdateStatus(ctx, t); err != nil {
			if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
				c.notify()
				return time.Time{}, nil
			}
			return time.Time{}, fmt.Errorf("opstask: fail interrupted task %s: %w", t.Key(), err)
		}
		logr.FromContextOrDiscard(ctx).Info("opstask interrupted task failed", "task", t.Key(), "previousRun", prev, "reason", fail.Error())
		c.recordFinished(t)
		c.notify()
		return time.Time{}, nil
	}
	l := c.newLease(t, runID)
	err = l.write(ctx, func(t *Task, now time.Time) error {
		return t.Status.Progress(now, runID, fmt.Sprintf("resumed: run %s stopped renewing", prev))
	})
	if err != nil {
		c.releaseSlot()
		if errors.Is(err, ErrLostClaim) {
			c.notify()
			return time.Time{}, nil
		}
		return time.Time{}, fmt.Errorf("opstask: take over task %s: %w", t.Key(), err)
	}
	if err := c.hold(ctx, l); err != nil {
		c.releaseSlot()
		if errors.Is(err, ErrLostClaim) {
			c.notify()
			return time.Time{}, nil
		}
		return time.Time{}, fmt.Errorf("opstask: take over task %s: %w", t.Key(), err)
	}
	logr.FromContextOrDiscard(ctx).Info("opstask taking over interrupted execution", "task", t.Key(), "previousRun", prev, "run", runID)
	c.launch(ctx, k, l, true)
	return time.Time{}, nil
}

// deadline returns when t's execution times out.
func (c *Controller) deadline(k *Handler, t *Task) time.Time {
	d := c.cfg.DefaultTimeout
	if k.Timeout != nil {
		if kd, err := k.Timeout(t.DeepCopy()); err == nil && kd > 0 {
			d = kd
		}
	}
	start := t.CreationTimestamp
	if t.Status.StartedAt != nil {
		start = t.Status.StartedAt.Time
	}
	return start.Add(d)
}

// leaseExpiry returns when the claim of another run on t lapses: LeaseDuration
// after this controller first saw t at its current version.
func (c *Controller) leaseExpiry(t *Task, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.observed[t.Key()]
	if !ok || o.rv != t.ResourceVersion {
		o = observation{rv: t.ResourceVersion, seenAt: now}
		c.observed[t.Key()] = o
	}
	return o.seenAt.Add(c.cfg.LeaseDuration)
}

// newRunID returns a fresh run ID.
func (c *Controller) newRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	if c.cfg.Identity != "" {
		id = c.cfg.Identity + "-" + id
	}
	return id
}
