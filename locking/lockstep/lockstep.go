package lockstep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// DefaultDeniedRetry is how long an instance on the deny list waits before
// a step of its looks at the lock again, unless Options.DeniedRetry says
// otherwise.
const DefaultDeniedRetry = time.Minute

// State is what the lock steps of one loop share: the lock, and whether a
// step of this loop took it (so that Release gives it back) or found locks
// disabled (said once per loop). Build one per loop in the chain's NewState
// and make the chain's state type a Holder of it.
type State struct {
	lock     *locking.Lock
	held     bool
	bypassed bool
}

// NewState returns the lock state of one loop over lock.
func NewState(lock *locking.Lock) *State { return &State{lock: lock} }

// Lock returns the loop's lock.
func (s *State) Lock() *locking.Lock { return s.lock }

// LockState returns s, so that a state type that embeds *State is a Holder.
func (s *State) LockState() *State { return s }

// Holder is a chain's per-loop state that carries the lock state: a struct
// embedding *State is one, and so is *State itself.
type Holder interface{ LockState() *State }

// Options adjust a global step (Global); nil means the defaults.
type Options struct {
	// DeniedRetry is how long a step waits, when this instance is on the
	// deny list, before it looks again. Zero means DefaultDeniedRetry.
	DeniedRetry time.Duration
	// TimeLayout formats the times in the steps' messages (time.Format).
	// Empty means time.RFC3339; times are shown in UTC.
	TimeLayout string
	// Margin ends Act's context this long before the lease's End
	// (locking.DoOptions.Margin): room for Act to stop, and for clock skew
	// with instances that add no ClockSkewTolerance of their own (the
	// FoundationDB operator's). Zero means none. It must not be negative
	// and must be shorter than the lock's Duration: otherwise the step
	// takes no lock and fails with a terminal error wrapping
	// locking.ErrInvalidConfig that names Options.Margin and its value.
	Margin time.Duration
}

// validate checks the options against the loop's lock.
func (o Options) validate(l *locking.Lock) error {
	switch {
	case o.Margin < 0:
		return fmt.Errorf("%w: lockstep.Options.Margin = %s: must not be negative", locking.ErrInvalidConfig, o.Margin)
	case o.Margin >= l.Duration():
		return fmt.Errorf("%w: lockstep.Options.Margin = %s: must be shorter than the lock's Duration (%s)", locking.ErrInvalidConfig, o.Margin, l.Duration())
	}
	return nil
}

func (o Options) deniedRetry() time.Duration {
	if o.DeniedRetry > 0 {
		return o.DeniedRetry
	}
	return DefaultDeniedRetry
}

func (o Options) format(t time.Time) string {
	layout := o.TimeLayout
	if layout == "" {
		layout = time.RFC3339
	}
	return t.UTC().Format(layout)
}

// Act is the work of a global step. It runs while the lock is ours, with a
// context that ends when the lease does (see locking.Lock.Do): it should
// read the object again from the API server (the lock may have waited on
// another instance that changed it), do what is still to be done, checking
// ctx before each part that must be exclusive, and persist the result. It
// returns what it did, for the loop's record, or "" if the fresh read left
// nothing to do.
type Act[T any] func(ctx context.Context, obj T, lease locking.Lease) (did string, err error)

// Global returns a step that runs act under the global lock, in the manner
// of the FoundationDB operator's global subreconcilers. pending says, from
// the object the loop read (a cache is fine), whether there is work: when
// there is none, the step takes no lock. Otherwise it takes or extends the
// lock with locking.Lock.Do (with Options.Margin) and then:
//
//   - Options invalid for the lock (Options.Margin): a terminal error, and
//     no lock taken;
//   - held by another instance: a requeue after HeldError.RequeueAfter (when
//     the holder's lock may be taken over), saying who holds it until when;
//   - this instance denied: a requeue after Options.DeniedRetry;
//   - the lease already over when Take returned: act is not called, and the
//     step requeues at once (the next loop takes the lock again);
//   - act's error, or a lease that ended while act ran: an error requeue
//     (locking.ErrLeaseEnded tells which), so that the step is tried again.
//
// The lock stays held after the step: the chain's Release step gives it
// back once the loop's global steps are done, so that consecutive global
// steps take it once.
func Global[T subreconcile.Object[T], S Holder](name string, pending func(obj T) bool, act Act[T], opts *Options) subreconcile.Named[T, S] {
	var o Options
	if opts != nil {
		o = *opts
	}
	return subreconcile.NamedFunc(name, func(ctx context.Context, obj T, loop subreconcile.Loop[S]) *subreconcile.Requeue {
		if !pending(obj) {
			return nil
		}
		st := loop.State().LockState()
		if err := o.validate(st.lock); err != nil {
			return subreconcile.RequeueOnError(subreconcile.Terminal(err))
		}
		ran := false
		lease, err := st.lock.Do(ctx, func(ctx context.Context, lease locking.Lease) error {
			ran = true
			st.took(loop, lease, o)
			did, err := act(ctx, obj, lease)
			if did != "" {
				loop.Acted(did)
			}
			return err
		}, &locking.DoOptions{Margin: o.Margin})
		var held *locking.HeldError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &held) && errors.Is(err, locking.ErrLocked):
			return subreconcile.RequeueAfter(held.RequeueAfter,
				fmt.Sprintf("%s holds the global lock until %s", held.Holder, o.format(held.End)))
		case errors.Is(err, locking.ErrDenied):
			return subreconcile.RequeueAfter(o.deniedRetry(),
				fmt.Sprintf("%s is on the deny list: no global operations", st.lock.ID()))
		case !ran && errors.Is(err, locking.ErrLeaseEnded):
			end := o.format(lease.End)
			if o.Margin > 0 {
				end += fmt.Sprintf(" (less a margin of %s)", o.Margin)
			}
			return subreconcile.RequeueAfter(time.Nanosecond,
				fmt.Sprintf("the global lock ran out at %s before %s could act", end, st.lock.ID()))
		default:
			return subreconcile.RequeueOnError(err)
		}
	})
}

// took records in the loop that a global step holds the lock (or found
// locks disabled, said once per loop).
func (s *State) took(loop interface{ Acted(string) }, lease locking.Lease, o Options) {
	switch lease.Outcome {
	case locking.OutcomeTaken:
		loop.Acted("took the global lock until " + o.format(lease.End))
	case locking.OutcomeTakenOver:
		loop.Acted(fmt.Sprintf("took the global lock over from %s, until %s", lease.Previous, o.format(lease.End)))
	case locking.OutcomeBypassed:
		if !s.bypassed {
			loop.Acted("locks are disabled: acting without the global lock")
		}
		s.bypassed = true
		return
	}
	s.held = true
}

// DenyList returns a step that makes the lock's deny list say what
// entries(obj) asks for (locking.Lock.UpdateDenyList: an entry denies its
// ID, or with Allow lifts the denial). It does nothing when entries is
// empty or locks are disabled, and records the new list when it changed.
func DenyList[T subreconcile.Object[T], S Holder](name string, entries func(obj T) []locking.DenyListEntry) subreconcile.Named[T, S] {
	return subreconcile.NamedFunc(name, func(ctx context.Context, obj T, loop subreconcile.Loop[S]) *subreconcile.Requeue {
		want := entries(obj)
		l := loop.State().LockState().lock
		if len(want) == 0 || l.Disabled() {
			return nil
		}
		before, err := l.DenyList(ctx)
		if err != nil {
			return subreconcile.RequeueOnError(err)
		}
		if _, err := l.UpdateDenyList(ctx, want, nil); err != nil {
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
	})
}

// Release returns the step that ends a chain with global steps: it
// releases the lock if a step of this loop took it. A lock that is no
// longer ours (taken over after it ran out) is logged and recorded, not
// retried: there is nothing of ours left to release.
func Release[T subreconcile.Object[T], S Holder](name string) subreconcile.Named[T, S] {
	return subreconcile.NamedFunc(name, func(ctx context.Context, _ T, loop subreconcile.Loop[S]) *subreconcile.Requeue {
		st := loop.State().LockState()
		if !st.held {
			return nil
		}
		if _, _, err := st.lock.Release(ctx, nil); err != nil {
			if errors.Is(err, locking.ErrNotHeld) {
				loop.Logger().Error(err, "global lock lost before release")
				loop.Acted("the global lock was no longer ours: " + err.Error())
				return nil
			}
			return subreconcile.RequeueOnError(err)
		}
		st.held = false
		loop.Acted("released the global lock")
		return nil
	})
}

// NewStates returns a chain's NewState for a state of *State: each loop
// gets a lock built from cfg, disabled when disabled(obj) says so (a
// spec's disable switch; nil means never).
func NewStates[T any](cfg locking.Config, disabled func(obj T) bool) func(context.Context, T) (*State, error) {
	return func(_ context.Context, obj T) (*State, error) {
		c := cfg
		c.Disabled = disabled != nil && disabled(obj)
		l, err := locking.New(c)
		if err != nil {
			return nil, err
		}
		return NewState(l), nil
	}
}
