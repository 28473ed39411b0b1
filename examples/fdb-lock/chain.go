package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/lockstep"
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
type loopState = lockstep.State

// newRunner returns the chain, in the order of the FoundationDB operator's
// cluster reconciler: the deny list first, then the global operations, each
// of which takes (or extends) the lock before acting, then the release.
func (o *operator) newRunner(cfg subreconcile.Config[*Database, *loopState]) (*subreconcile.Runner[*Database, *loopState], error) {
	lo := lockstep.Options{DeniedRetry: o.deniedRetry, TimeLayout: time.TimeOnly}
	cfg.Name = "Database"
	cfg.Steps = []subreconcile.Named[*Database, *loopState]{
		lockstep.DenyList[*Database, *loopState]("UpdateLockConfiguration", denyList),
		o.global("ChangeCoordinators", changeCoordinators, lo),
		o.global("ExcludeProcesses", excludeProcesses, lo),
		o.global("BounceProcesses", bounceProcesses, lo),
		lockstep.Release[*Database, *loopState]("ReleaseLock"),
	}
	cfg.NewState = func(_ context.Context, db *Database) (*loopState, error) {
		cfg := o.lockConfig
		cfg.Backend, cfg.LockID, cfg.Disabled = o.backend, o.id, db.Spec.LockOptions.DisableLocks
		l, err := locking.New(cfg)
		return lockstep.NewState(l), err
	}
	return subreconcile.New(cfg)
}

// A plan says what a global operation would do to a database for instance
// id, and how that changes the status; "" if there is nothing to do.
type plan func(db *Database, id string) (what string, apply func(*DatabaseStatus))

// global is a step that runs the operation p plans under the global lock
// (lockstep.Global: only while the lock is ours, with a context that ends
// with the lease on the lock's clock). It reads the database again once it
// holds the lock, because the previous holder may have done the work.
func (o *operator) global(name string, p plan, lo lockstep.Options) subreconcile.Named[*Database, *loopState] {
	pending := func(db *Database) bool { what, _ := p(db, o.id); return what != "" }
	return lockstep.Global[*Database, *loopState](name, pending, func(ctx context.Context, db *Database, _ locking.Lease) (string, error) {
		fresh, err := o.dbs.Get(ctx, db.Namespace, db.Name)
		if err != nil {
			return "", err
		}
		*db = *fresh
		what, apply := p(db, o.id)
		if what == "" {
			return "", nil
		}
		if err := o.actor.Act(ctx, o.id, what); err != nil {
			return "", fmt.Errorf("%s: %w", what, err)
		}
		apply(&db.Status)
		updated, err := o.dbs.UpdateStatus(ctx, db)
		if err != nil {
			return "", err
		}
		*db = *updated
		return what, nil
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
