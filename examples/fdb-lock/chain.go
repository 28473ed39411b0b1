package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// databases reads a Database afresh and writes its status: the manager's
// API reader and client in a cluster, a map in the scenario.
type databases interface {
	Get(ctx context.Context, namespace, name string) (*Database, error)
	UpdateStatus(ctx context.Context, db *Database) (*Database, error)
}

// actor carries out a global operation. There is no FoundationDB in this
// example: the controller logs the operation and waits as long as one takes,
// the scenario prints it, and the end-to-end test records when it ran.
type actor interface {
	Act(ctx context.Context, instance, operation string) error
}

// operator is one operator instance: its lock ID, where its lock lives, and
// the chain it runs over every Database.
type operator struct {
	id      string
	backend locking.Backend
	// lockOptions are used for every loop; Disabled comes from the spec.
	lockConfig locking.Config
	dbs        databases
	actor      actor
	// deniedRetry is when a denied instance looks again: retrying does not
	// help until someone allows it, which may be another instance's spec.
	deniedRetry time.Duration
}

// loopState is built once per loop: the lock, with the spec's disable
// switch, and whether this loop holds it.
type loopState struct {
	lock *locking.Lock
	// held: a step of this loop took or extended the lock. bypassed: a step
	// went ahead with locks disabled.
	held, bypassed bool
}

// newRunner returns the chain, in the order of the FoundationDB operator's
// cluster reconciler: the deny list first, then the global operations, each
// of which takes (or extends) the lock before acting, then the release.
func (o *operator) newRunner(cfg subreconcile.Config[*Database, *loopState]) (*subreconcile.Runner[*Database, *loopState], error) {
	cfg.Name = "Database"
	cfg.Steps = []subreconcile.Named[*Database, *loopState]{
		subreconcile.NamedFunc("UpdateLockConfiguration", o.updateLockConfiguration),
		o.global("ChangeCoordinators", changeCoordinators),
		o.global("ExcludeProcesses", excludeProcesses),
		o.global("BounceProcesses", bounceProcesses),
		subreconcile.NamedFunc("ReleaseLock", o.releaseLock),
	}
	cfg.NewState = func(_ context.Context, db *Database) (*loopState, error) {
		cfg := o.lockConfig
		cfg.Backend, cfg.LockID, cfg.Disabled = o.backend, o.id, db.Spec.LockOptions.DisableLocks
		l, err := locking.New(cfg)
		return &loopState{lock: l}, err
	}
	return subreconcile.New(cfg)
}

// updateLockConfiguration applies the spec's deny list, as the FoundationDB
// operator's UpdateLockConfiguration does; not while locks are disabled.
func (o *operator) updateLockConfiguration(ctx context.Context, db *Database, loop subreconcile.Loop[*loopState]) *subreconcile.Requeue {
	entries := denyList(db)
	if db.Spec.LockOptions.DisableLocks || len(entries) == 0 {
		return nil
	}
	l := loop.State().lock
	// UpdateDenyList does not say what it changed; reading the list around
	// it is how the timeline shows when the list changes.
	before, err := l.DenyList(ctx)
	if err != nil {
		return subreconcile.RequeueOnError(err)
	}
	if _, err := l.UpdateDenyList(ctx, entries, nil); err != nil {
		return subreconcile.RequeueOnError(err)
	}
	after, err := l.DenyList(ctx)
	if err != nil {
		return subreconcile.RequeueOnError(err)
	}
	if !slices.Equal(before, after) {
		loop.Acted(fmt.Sprintf("deny list is now %v", after))
	}
	return nil
}

// A plan says what a global operation would do to a database for instance
// id, and how that changes the status; "" if there is nothing to do.
type plan func(db *Database, id string) (what string, apply func(*DatabaseStatus))

// global is a step that takes the lock before it acts, through Lock.Do:
// the operation runs only while the lock is ours, with a context that ends
// at the lease's end on the lock's clock, and never on a lease that ran out
// before Take returned (a hung request). It checks the resource again once
// it holds the lock, because the previous holder may have done the work.
func (o *operator) global(name string, p plan) subreconcile.Named[*Database, *loopState] {
	return subreconcile.NamedFunc(name, func(ctx context.Context, db *Database, loop subreconcile.Loop[*loopState]) *subreconcile.Requeue {
		if what, _ := p(db, o.id); what == "" {
			return nil
		}
		st := loop.State()
		ran := false
		lease, err := st.lock.Do(ctx, func(ctx context.Context, lease locking.Lease) error {
			ran = true
			o.tookLock(loop, lease)
			fresh, err := o.dbs.Get(ctx, db.Namespace, db.Name)
			if err != nil {
				return err
			}
			*db = *fresh
			what, apply := p(db, o.id)
			if what == "" {
				return nil
			}
			if err := o.actor.Act(ctx, o.id, what); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			apply(&db.Status)
			updated, err := o.dbs.UpdateStatus(ctx, db)
			if err != nil {
				return err
			}
			*db = *updated
			loop.Acted(what)
			return nil
		}, nil)
		var held *locking.HeldError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &held) && errors.Is(err, locking.ErrLocked):
			return subreconcile.RequeueAfter(held.RequeueAfter,
				fmt.Sprintf("%s holds the global lock until %s", held.Holder, clockTime(held.End)))
		case errors.Is(err, locking.ErrDenied):
			return subreconcile.RequeueAfter(o.deniedRetry, fmt.Sprintf("%s is on the deny list: no global operations", o.id))
		case !ran && errors.Is(err, locking.ErrLeaseEnded):
			return subreconcile.RequeueAfter(time.Nanosecond, fmt.Sprintf("the global lock ran out at %s before %s could act", clockTime(lease.End), o.id))
		default:
			return subreconcile.RequeueOnError(err)
		}
	})
}

// tookLock records, once the lock is ours, how it came to be.
func (o *operator) tookLock(loop subreconcile.Loop[*loopState], lease locking.Lease) {
	st := loop.State()
	switch lease.Outcome {
	case locking.OutcomeTaken:
		loop.Acted(fmt.Sprintf("took the global lock until %s", clockTime(lease.End)))
	case locking.OutcomeTakenOver:
		loop.Acted(fmt.Sprintf("took the global lock over from %s, until %s", lease.Previous, clockTime(lease.End)))
	case locking.OutcomeBypassed:
		if !st.bypassed {
			loop.Acted("locks are disabled: acting without the global lock")
		}
		st.bypassed = true
		return
	}
	st.held = true
}

// releaseLock releases the lock once every global step of the loop is done,
// so that other instances need not wait for it to expire. A loop that ended
// early keeps it: its work is not finished.
func (o *operator) releaseLock(ctx context.Context, _ *Database, loop subreconcile.Loop[*loopState]) *subreconcile.Requeue {
	st := loop.State()
	if !st.held {
		return nil
	}
	if _, _, err := st.lock.Release(ctx, nil); err != nil {
		if errors.Is(err, locking.ErrNotHeld) {
			// Our operations may not have been exclusive; say so loudly.
			loop.Logger().Error(err, "global lock lost before release")
			loop.Acted("the global lock was no longer ours: " + err.Error())
			return nil
		}
		return subreconcile.RequeueOnError(err)
	}
	loop.Acted("released the global lock")
	return nil
}

func changeCoordinators(db *Database, _ string) (string, func(*DatabaseStatus)) {
	want, have := db.Spec.Coordinators, db.Status.Coordinators
	if want == 0 || want == have {
		return "", nil
	}
	return fmt.Sprintf("changed coordinators from %d to %d", have, want),
		func(s *DatabaseStatus) { s.Coordinators = want }
}

func excludeProcesses(db *Database, _ string) (string, func(*DatabaseStatus)) {
	var missing []string
	for _, p := range db.Spec.ExcludedProcesses {
		if !slices.Contains(db.Status.ExcludedProcesses, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return "", nil
	}
	return fmt.Sprintf("excluded processes %v", missing),
		func(s *DatabaseStatus) { s.ExcludedProcesses = append(s.ExcludedProcesses, missing...) }
}

// bounceProcesses restarts this instance's own processes on the spec's
// version: every instance has work here, so they contend for the lock.
func bounceProcesses(db *Database, id string) (string, func(*DatabaseStatus)) {
	want, have := db.Spec.Version, db.Status.RunningVersions[id]
	if want == "" || want == have {
		return "", nil
	}
	what := fmt.Sprintf("bounced %s processes from %s to %s", id, have, want)
	if have == "" {
		what = fmt.Sprintf("bounced %s processes to %s", id, want)
	}
	return what, func(s *DatabaseStatus) {
		if s.RunningVersions == nil {
			s.RunningVersions = map[string]string{}
		}
		s.RunningVersions[id] = want
	}
}

func clockTime(t time.Time) string { return t.UTC().Format(time.TimeOnly) }
