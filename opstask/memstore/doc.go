// Package memstore is an in-memory opstask.Store, for tests, examples and
// operators that keep tasks in their own process. It passes the conformance
// suite in opstask/opstasktest, so it is the test double of the Kubernetes
// store (opstask/kubestore).
//
//	store := memstore.New(clock) // nil: the real clock
//	created, err := store.Create(ctx, &opstask.Task{Namespace: "ns", Name: "defrag-1", Spec: spec})
//
// Its resource versions are a counter, its UIDs are "uid-1", "uid-2", ...,
// and Create stamps tasks with the store's clock, at full precision (the
// Kubernetes API server truncates creation timestamps to seconds).
//
// # Guarantees
//
//   - Every method is safe for concurrent use and atomic: List sees every
//     change completed before it was called.
//   - Tasks are copied in and out: a caller's change to a task it holds
//     never changes the store.
//   - UpdateStatus changes only the status, SetHeld only the hold, and
//     UpdateStatus, SetHeld and Delete act only when the task's UID and
//     resourceVersion are current: a stale copy, or a copy of a task since
//     recreated under its name, changes nothing.
//   - Delete removes a task at once unless it is held; a held task stays,
//     with Deleting set, until SetHeld releases it, as a Kubernetes object
//     with a finalizer does.
//   - Watch calls notify after every change (create, status update, hold,
//     delete) until its context is done; Inform delivers every task and
//     then every change, in order (an opstask.Informer).
//
// # What it does not guarantee
//
//   - Durability or sharing: tasks live in this process's memory and are
//     gone when it exits; two processes have two stores.
//   - Validation of the spec: Create stores whatever it is given, except a
//     task without a name or one whose namespace and name are taken.
//   - A non-blocking Watch: notify (and Inform's events) are called with the
//     store locked and must return at once (opstask's controller's do).
//   - The order of List: it is map order; the controller sorts.
//
// # Errors
//
// Create returns ErrExists for a taken namespace and name. UpdateStatus,
// SetHeld and Delete return errors wrapping opstask.ErrNotFound (no task with that name
// and UID) or opstask.ErrConflict (the resourceVersion is not current),
// naming the task.
package memstore
