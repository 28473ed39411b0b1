package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/examples/fdb-lock/api"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/lockstep"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// The custom resource this example reconciles is api.Database; these names
// keep the controller's code short.
type (
	Database       = api.Database
	DatabaseSpec   = api.DatabaseSpec
	DatabaseStatus = api.DatabaseStatus
	LockOptions    = api.LockOptions
	DenyListEntry  = locking.DenyListEntry
)

// actor carries out a global operation. There is no FoundationDB in this
// example: the controller logs the operation and waits as long as one takes,
// the scenario prints it, and the end-to-end test records when it ran.
type actor interface {
	Act(ctx context.Context, instance, operation string) error
}

// operator is one operator instance: its options (lock ID, duration and
// clock, denied retry), where its lock lives, and the chain it runs over
// every Database.
type operator struct {
	controllerOptions
	backend locking.Backend
	// live reads a Database afresh (the manager's API reader), c writes
	// its status.
	live  client.Reader
	c     client.Client
	actor actor
}

// loopState is built once per loop: the lock, with the spec's disable
// switch, and whether this loop holds it.
type loopState = lockstep.State

// newRunner returns the chain, in the order of the FoundationDB operator's
// cluster reconciler: the deny list first, then the global operations, each
// of which takes (or extends) the lock before acting, then the release.
func (o *operator) newRunner(cfg subreconcile.Config[*Database, *loopState]) (*subreconcile.Runner[*Database, *loopState], error) {
	lo := &lockstep.Options{DeniedRetry: o.deniedRetry, TimeLayout: time.TimeOnly}
	lc := locking.Config{Backend: o.backend, LockID: o.lockID, Duration: o.lockDuration, Clock: o.clock}
	cfg.Name = "Database"
	cfg.Steps = []subreconcile.Named[*Database, *loopState]{
		lockstep.DenyList[*Database, *loopState]("UpdateLockConfiguration", func(db *Database) []locking.DenyListEntry {
			return db.Spec.LockOptions.DenyList
		}),
		o.global("ChangeCoordinators", changeCoordinators, lo),
		o.global("ExcludeProcesses", excludeProcesses, lo),
		o.global("BounceProcesses", bounceProcesses, lo),
		lockstep.Release[*Database, *loopState]("ReleaseLock"),
	}
	cfg.NewState = lockstep.NewStates(lc, func(db *Database) bool { return db.Spec.LockOptions.DisableLocks })
	return subreconcile.New(cfg)
}

// A plan says what a global operation would do to a database for instance
// id, and how that changes the status; "" if there is nothing to do.
type plan func(db *Database, id string) (what string, apply func(*DatabaseStatus))

// global is a step that runs the operation p plans under the global lock
// (lockstep.Global: only while the lock is ours, with a context that ends
// with the lease on the lock's clock). It reads the database again once it
// holds the lock, because the previous holder may have done the work.
func (o *operator) global(name string, p plan, lo *lockstep.Options) subreconcile.Named[*Database, *loopState] {
	pending := func(db *Database) bool { what, _ := p(db, o.lockID); return what != "" }
	return lockstep.Global[*Database, *loopState](name, pending, func(ctx context.Context, db *Database, _ locking.Lease) (string, error) {
		var fresh Database
		if err := o.live.Get(ctx, client.ObjectKeyFromObject(db), &fresh); err != nil {
			return "", err
		}
		*db = fresh
		what, apply := p(db, o.lockID)
		if what == "" {
			return "", nil
		}
		if err := o.actor.Act(ctx, o.lockID, what); err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		apply(&db.Status)
		return what, o.c.Status().Update(ctx, db)
	}, lo)
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
	missing := slices.DeleteFunc(slices.Clone(db.Spec.ExcludedProcesses),
		func(p string) bool { return slices.Contains(db.Status.ExcludedProcesses, p) })
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
