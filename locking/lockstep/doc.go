// Package lockstep runs steps of a subreconcile chain under the global
// operator lock of package locking, as the FoundationDB operator's global
// subreconcilers do: a step that has work takes or extends the lock, acts
// only while the lease is valid, and the chain's last step gives the lock
// back.
//
// Start with [Global], a step whose Act runs under the lock, and end the
// chain with [Release] (Wiring shows a whole chain):
//
//	lockstep.Global[*Cluster, *lockstep.State]("ChangeCoordinators", coordinatorsDiffer, changeCoordinators, nil)
//
// A Global step with nothing pending takes no lock, and its Act never starts
// on a lease that has ended. The lease is not extended while Act runs:
// keep each Act much shorter than the lock's duration.
//
// # Wiring
//
// A chain's per-loop state carries a *State (or is one), built from a
// locking.Lock in NewState (NewStates makes that function); the steps are
// Global (work under the lock), DenyList (the spec's deny list applied to
// the lock) and Release:
//
//	cfg := subreconcile.Config[*Cluster, *lockstep.State]{
//		Name: "Cluster",
//		Steps: []subreconcile.Named[*Cluster, *lockstep.State]{
//			lockstep.DenyList[*Cluster, *lockstep.State]("UpdateLockConfiguration", denyList),
//			lockstep.Global[*Cluster, *lockstep.State]("ChangeCoordinators", coordinatorsDiffer, changeCoordinators, &lockstep.Options{Margin: 30 * time.Second}),
//			lockstep.Release[*Cluster, *lockstep.State]("ReleaseLock"),
//		},
//		NewState: lockstep.NewStates(locking.Config{Backend: backend, LockID: id},
//			func(c *Cluster) bool { return c.Spec.DisableLocks }),
//	}
//
// # Guarantees
//
//   - A Global step with nothing pending takes no lock.
//   - Its Act runs only with the lock taken, extended or knowingly bypassed
//     (locking.Config.Disabled), never on a lease that had already ended
//     (less Options.Margin) when Take returned, and with a context that
//     ends with the lease, less Options.Margin, on the lock's clock
//     (locking.Lock.Do). Beside instances that add no clock-skew tolerance
//     of their own (the FoundationDB operator's), set a Margin.
//   - Options.Margin negative, or not shorter than the lock's Duration, is
//     a terminal error (wrapping locking.ErrInvalidConfig, naming the field
//     and its value) before any lock is taken.
//   - Held elsewhere, the step requeues when the holder's lock may be taken
//     over (locking.HeldError.RequeueAfter); denied, after
//     Options.DeniedRetry; both requeues are immediate (the chain stops),
//     as every later global step would wait for the same lock.
//   - The lock taken by any step of a loop is released by Release, once. A
//     lock lost meanwhile (taken over after it ran out) is recorded, never
//     released on its new holder's behalf.
//
// It does not extend the lease while Act runs: keep each Act much shorter
// than the lock's duration (split long work into steps, each of which
// extends the lock when it takes it again).
package lockstep
