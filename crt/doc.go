// Package crt plugs groundskeeper's packages into a controller-runtime
// manager (sigs.k8s.io/controller-runtime): it owns what every domain's
// adapter shares, how a reconcile ends (Result, Terminal), a subreconcile
// chain as a controller (Reconciler), a controller queue on a given clock
// (QueueOn), Secrets and events. The domains have packages of their own
// beside it: claims (lifecycle), tasks (opstask), locks (locking) and
// backups (backupstore).
// Every adapter that runs on a manager is a value with
// SetupWithManager(mgr) error, and Reconcile where it is a reconciler:
//
//	err := crt.Reconciler[*v1.Database, state]{Client: mgr.GetClient(), Runner: runner,
//		New: func() *v1.Database { return new(v1.Database) }}.SetupWithManager(mgr)
//
// and a reconcile of your own ends with
//
//	return crt.Result(ctx, next, err)
//
// # Guarantees
//
//   - Result: a conflict from a stale cache, and the global lock held by
//     another instance, are quiet requeues; a "do not retry" error is a
//     reconcile.TerminalError; any other error is returned for the
//     controller's retry.
//   - Terminal wraps in reconcile.TerminalError the packages' "do not
//     retry" errors (listed on Terminal), and leaves every other error as it
//     is. Every exported error sentinel and error type of the packages is
//     classified, terminal or not; a test fails when one is added without
//     a classification.
//   - A joined error (errors.Join, several %w) is terminal, or a quiet
//     requeue in Result (at the earliest of its parts' times), only when
//     every one of its parts is; otherwise it is an ordinary error, logged
//     and retried.
//   - Errors keep their type: apierrors.IsNotFound, IsConflict and
//     IsForbidden work on what the adapters of crt and its domain packages
//     return.
//   - The core packages take small interfaces of their own and never
//     import controller-runtime, so a client-go-only user never compiles
//     crt; crt and its domain packages but backups do not import
//     backupstore, so an operator that wires only lifecycle, locking,
//     opstask or subreconcile through them links no cloud SDK.
//
// backupstore.LoadCredentials reads Secrets through Secrets(mgr.GetAPIReader())
// (a SecretGetter, which is a backupstore.SecretGetter: crt does not import
// backupstore, and knows its errors by the values backupstore re-exports).
// Events adapts the manager's events.k8s.io recorder
// (mgr.GetEventRecorder(name)) to the one the packages take.
//
// The five example operators (examples/ in the repository) run on a
// manager, with two replicas in their end-to-end tests, and show crt and
// its domain packages in context.
package crt
