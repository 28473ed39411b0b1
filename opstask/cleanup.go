package opstask

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/go-logr/logr"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// finishedJobs returns the jobs of the finished tasks: release the hold of
// one whose deletion was asked for or whose kind is not registered (those
// are also returned, to be reported), clean up one whose TTL may have run
// out.
func (c *Controller) finishedJobs(ctx context.Context, tasks []*Task, now time.Time) (jobs []job, withoutKind []*Task) {
	release := func(t *Task) job {
		return func() (time.Time, error) { return time.Time{}, c.release(ctx, t) }
	}
	for _, t := range tasks {
		switch {
		case !t.State().Finished():
		case t.Deleting:
			// Its deletion was asked for: nothing to clean up, and no
			// executor runs for a finished task, so its hold goes (others'
			// finalizers may keep it).
			if t.Held {
				jobs = append(jobs, release(t))
			}
		case !c.canClean(t):
			if t.Held {
				jobs = append(jobs, release(t))
			}
			withoutKind = append(withoutKind, t)
		default:
			jobs = append(jobs, func() (time.Time, error) {
				if t.Held {
					// Left by the execution: released before the cleanup.
					if err := c.release(ctx, t); err != nil || t.Held {
						return time.Time{}, err // a conflict triggered another Sync
					}
				}
				return c.cleanup(ctx, t, now)
			})
		}
	}
	return jobs, withoutKind
}

// refJobs returns the jobs of the finished tasks kept by reference whose
// TTL ran out: each reads its task from the store, and acts on what it read
// as finishedJobs does. The read is the fresh one a deletion rests on; the
// writes that follow are guarded by its UID and resourceVersion. The task
// read may be another incarnation under the name (deleted and created
// again): it is judged by what was read, its own state and TTL, as the
// copy would judge it.
func (c *Controller) refJobs(ctx context.Context, refs []taskRef, now time.Time) []job {
	jobs := make([]job, 0, len(refs))
	for _, r := range refs {
		jobs = append(jobs, func() (time.Time, error) {
			g, ok := c.cfg.Store.(Getter)
			if !ok {
				return time.Time{}, fmt.Errorf("opstask: task %s/%s was delivered with SetFinished by a store that is not a Getter: it cannot be read to be cleaned up", r.namespace, r.name)
			}
			t, err := g.Get(ctx, r.namespace, r.name)
			switch {
			case errors.Is(err, ErrNotFound):
				return time.Time{}, nil // its deletion is on its way to the copy
			case err != nil:
				return time.Time{}, fmt.Errorf("opstask: read task %s/%s past its TTL: %w", r.namespace, r.name, err)
			}
			jobs, _ := c.finishedJobs(ctx, []*Task{t}, now)
			var next time.Time
			var errs []error
			for _, j := range jobs {
				at, err := j()
				if !at.IsZero() && (next.IsZero() || at.Before(next)) {
					next = at
				}
				errs = append(errs, err)
			}
			return next, errors.Join(errs...)
		})
	}
	return jobs
}

// canClean reports whether this controller may clean up and delete the
// finished task t after its TTL. Never delete what you cannot clean up: a
// task whose kind is not registered here may have run an executor whose
// Cleanup only a controller with the kind can run. A rejected task never
// ran, so there is nothing to clean up whatever its kind.
func (c *Controller) canClean(t *Task) bool {
	return c.canCleanKind(t.Kind(), t.State())
}

// canCleanKind is canClean of a task of kind in state.
func (c *Controller) canCleanKind(kind string, state TaskState) bool {
	return c.kinds[kind] != nil || state == TaskStateRejected
}

// reportWithoutKind logs, once per task, the finished tasks past their TTL
// that this controller leaves alone because it does not have their kind,
// and sets the metric that counts them.
func (c *Controller) reportWithoutKind(ctx context.Context, tasks []*Task, now time.Time) {
	log := logr.FromContextOrDiscard(ctx)
	expired := map[string]bool{}
	byKind := map[string]int{}
	c.mu.Lock()
	for _, t := range tasks {
		if e, _, err := c.expiry(t, now); err != nil || e == nil {
			continue
		}
		expired[t.UID] = true
		byKind[t.Kind()]++
		if !c.withoutKind[t.UID] {
			log.Info("opstask leaves a finished task past its TTL alone: its kind is not registered in this controller, which cannot run its Cleanup; a controller that has the kind cleans it up and deletes it",
				"task", t.Key(), "kind", t.Kind(), "state", t.State())
		}
	}
	c.withoutKind = expired
	c.mu.Unlock()
	c.cfg.Metrics.setWithoutKind(byKind)
}

// Expired is a finished task whose time-to-live has run out: Sync runs its
// kind's Cleanup and deletes it.
type Expired struct {
	Task *Task
	// FinishedAt is when the task reached its final state
	// (lastTransitionTime; its creation if it has none).
	FinishedAt time.Time
	// TTL is the time-to-live that applied: spec.ttlSecondsAfterFinished or
	// Config.DefaultTTL.
	TTL time.Duration
	// At is when the TTL ran out: TTL plus Config.ClockSkewTolerance after
	// the end of the second FinishedAt falls in (timestamps in Kubernetes
	// are truncated to the second, so the task may have finished up to a
	// second after FinishedAt).
	At time.Time
}

// DryRun returns the tasks that Sync would clean up and delete if it ran
// now, and why, without changing anything. Like Sync, it leaves out
// executed tasks whose kind is not registered in this controller.
func (c *Controller) DryRun(ctx context.Context) ([]Expired, error) {
	tasks, err := c.cfg.Store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("opstask: list tasks: %w", err)
	}
	now := c.cfg.Clock.Now()
	var out []Expired
	var errs []error
	for _, t := range tasks {
		if !t.State().Finished() || t.Deleting || !c.canClean(t) {
			continue
		}
		e, _, err := c.expiry(t, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if e != nil {
			out = append(out, *e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task.Before(out[j].Task) })
	return out, errors.Join(errs...)
}

// expiresAt returns when the TTL of the finished task t runs out, as
// expiry judges it; a TTL expiry cannot read runs out at once, so that the
// Sync that acts on t reports the error.
func (c *Controller) expiresAt(t *Task) time.Time {
	at, _, _, err := c.ttlOf(t)
	if err != nil {
		return time.Time{}
	}
	return at
}

// ttlOf returns when the TTL of the finished task t runs out, when it
// finished, and its TTL.
func (c *Controller) ttlOf(t *Task) (at, finished time.Time, ttl time.Duration, err error) {
	at, finished, ttl, err = c.ttlAt(t.Spec.TTLSecondsAfterFinished, t.Status.finishedAt(), t.CreationTimestamp)
	if err != nil {
		return time.Time{}, time.Time{}, 0, fmt.Errorf("opstask: task %s: %w", t.Key(), err)
	}
	return at, finished, ttl, nil
}

// refExpiresAt is expiresAt of a task kept by reference.
func (c *Controller) refExpiresAt(f FinishedTask) time.Time {
	at, _, _, err := c.ttlAt(f.TTLSecondsAfterFinished, f.FinishedAt, f.CreationTimestamp)
	if err != nil {
		return time.Time{}
	}
	return at
}

// ttlAt is ttlOf of a task of spec.ttlSecondsAfterFinished ttlSeconds,
// finished at finished (zero: unknown), created at created.
func (c *Controller) ttlAt(ttlSeconds *int32, finished, created time.Time) (at, _ time.Time, ttl time.Duration, err error) {
	ttl = c.cfg.DefaultTTL
	if ttlSeconds != nil {
		d, err := retention.Seconds(int64(*ttlSeconds))
		if err != nil {
			return time.Time{}, time.Time{}, 0, fmt.Errorf("spec.ttlSecondsAfterFinished: %w", err)
		}
		ttl = d
	}
	if finished.IsZero() {
		// A finished task without a transition time was written by
		// someone else; count from its creation rather than keep it forever.
		finished = created
	}
	// Kubernetes truncates timestamps to the second: a task stamped
	// 10:00:00 may have finished at 10:00:00.9. Counting from the end of
	// the second makes the TTL never run out early (and up to a second
	// late). The tolerance covers a clock ahead of the finishing one's.
	return finished.Truncate(time.Second).Add(time.Second + c.cfg.ClockSkewTolerance + ttl), finished, ttl, nil
}

// expiry decides, for a finished task, whether its TTL has run out at now
// (a non-nil Expired) or when it will (next).
func (c *Controller) expiry(t *Task, now time.Time) (*Expired, time.Time, error) {
	at, finished, ttl, err := c.ttlOf(t)
	if err != nil {
		return nil, time.Time{}, err
	}
	var res retention.Result
	items := []retention.Item{{ID: t.Key(), Time: at.Add(-ttl)}}
	// A task is not a backup, and is judged alone: no guard keeps it.
	alone := retention.Options{AllowDeleteNewest: true}
	if err := alone.Evaluate(retention.TTL{After: ttl}, now, items, &res); err != nil {
		return nil, time.Time{}, err
	}
	if res.Decisions[0].Keep {
		return nil, res.Next, nil
	}
	return &Expired{Task: t, FinishedAt: finished, TTL: ttl, At: items[0].Time.Add(ttl)}, time.Time{}, nil
}

// cleanup deletes a finished task whose TTL ran out, after the kind's
// cleanup, and otherwise returns when it runs out. A cleanup is claimed like
// an execution: lastOperation Cleanup/InProgress with this controller's run
// ID, renewed through a lease (see lease) while Handler.Cleanup runs, so that
// of several controllers only one runs a task's cleanup at a time. Another
// controller's claim is taken over only when nobody wrote the task for
// LeaseDuration.
func (c *Controller) cleanup(ctx context.Context, t *Task, now time.Time) (time.Time, error) {
	e, next, err := c.expiry(t, now)
	if err != nil || e == nil {
		return next, err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("task", t.Key())
	k := c.kinds[t.Kind()] // nil only for a rejected task: see canClean
	if k == nil || k.Cleanup == nil {
		if err := c.cfg.Store.Delete(ctx, t); err != nil {
			if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
				return time.Time{}, nil
			}
			return time.Time{}, fmt.Errorf("opstask: delete task %s: %w", t.Key(), err)
		}
		log.V(1).Info("opstask task deleted after its TTL", "state", t.State())
		return time.Time{}, nil
	}

	desc := "deleting what the task created"
	if lo := t.Status.LastOperation; cleanupClaimed(t) {
		// Another run's cleanup (this controller's own cleanups end before
		// the Sync that started them): it holds the task until nobody
		// wrote it for LeaseDuration.
		if expires := c.leaseExpiry(t, now); now.Before(expires) {
			return expires, nil
		}
		desc = fmt.Sprintf("resumed: cleanup run %s stopped renewing; deleting what the task created", lo.RunID)
	}
	runID := c.newRunID()
	l := c.newLease(t, runID)
	err = l.write(ctx, func(t *Task, now time.Time) error {
		return t.Status.Cleanup(now, LastOperationStateInProgress, runID, desc)
	})
	if err != nil {
		if errors.Is(err, ErrLostClaim) {
			c.notify() // another controller got there first: look again
			return time.Time{}, nil
		}
		return time.Time{}, fmt.Errorf("opstask: begin cleanup of task %s: %w", t.Key(), err)
	}
	log = log.WithValues("run", runID)
	cleanCtx, cancel := context.WithCancelCause(ctx)
	stop := l.keep(ctx, cancel, func(t *Task, now time.Time) error {
		return t.Status.Cleanup(now, LastOperationStateInProgress, runID, desc)
	})
	err = k.Cleanup(cleanCtx, l.last())
	stop()
	cancel(nil)
	switch {
	case ctx.Err() != nil:
		// The controller stops: the claim lapses and another controller
		// (or this one, restarted) takes the cleanup over.
		return time.Time{}, ctx.Err()
	case l.isLost():
		log.Info("opstask cleanup abandoned: claim lost", "error", err)
		c.notify()
		return time.Time{}, nil
	case err != nil:
		werr := l.write(ctx, func(t *Task, now time.Time) error {
			if err := t.Status.Cleanup(now, LastOperationStateFailed, runID, err.Error()); err != nil {
				return err
			}
			t.Status.AddError(CodeCleanupFailed, err.Error(), now)
			return nil
		})
		if werr != nil && !errors.Is(werr, ErrLostClaim) {
			log.Error(werr, "opstask could not record failed cleanup")
		}
		log.Info("opstask cleanup failed; retrying", "error", err.Error())
		return c.cfg.Clock.Now().Add(c.cfg.RetryInterval), nil
	}
	if err := l.delete(ctx); err != nil {
		if errors.Is(err, ErrLostClaim) {
			return time.Time{}, nil
		}
		return time.Time{}, fmt.Errorf("opstask: delete task %s: %w", t.Key(), err)
	}
	log.V(1).Info("opstask task deleted after its TTL and cleanup", "state", t.State())
	return time.Time{}, nil
}

// cleanupClaimed reports whether a run claims t's cleanup: its last
// operation is a Cleanup in progress.
func cleanupClaimed(t *Task) bool {
	lo := t.Status.LastOperation
	return t.State().Finished() && lo != nil && lo.Type == LastOperationTypeCleanup && lo.State == LastOperationStateInProgress
}
