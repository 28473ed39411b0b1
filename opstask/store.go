package opstask

import "context"

// Store holds tasks. The controller reads all of them with List and changes
// them only through UpdateStatus, SetHeld and Delete, each guarded by the
// task's ResourceVersion, so that several controllers may share one Store:
// of two controllers that act on the same read, one gets ErrConflict and
// nothing is written for it.
//
// A running task is held (SetHeld): a request to delete it, by a user or
// anyone else, leaves it in the store with Deleting set until the controller
// that runs it has stopped its executor and released the hold. Without the
// hold, a task deleted while it ran would leave its queue at once, and the
// next task of its target could start while the deleted one's executor
// still ran.
//
// Stores translate their native errors into ErrConflict and ErrNotFound;
// other errors are returned wrapped and are treated as transient. Every
// store passes the conformance suite in opstask/opstasktest. Tasks are
// created outside the controller (kubectl, a CLI, the store's own Create).
type Store interface {
	// List returns every task, read consistently: a task whose creation or
	// change completed before List was called is in the result as of that
	// change or a later one. The returned tasks belong to the caller.
	List(ctx context.Context) ([]*Task, error)

	// UpdateStatus replaces t's status in the store with t.Status if
	// t.ResourceVersion is the current version of the task with t's
	// namespace, name and UID, and sets t.ResourceVersion to the new
	// version. Nothing but the status changes. It returns ErrConflict when
	// the version is not current and ErrNotFound when the task (with that
	// UID) does not exist.
	UpdateStatus(ctx context.Context, t *Task) error

	// Delete deletes t if its UID and ResourceVersion are current. It
	// returns ErrConflict when the task changed and ErrNotFound when it is
	// already gone. A held task is not removed: its deletion is recorded
	// (Deleting, with a new version) and completes when the hold is
	// released.
	Delete(ctx context.Context, t *Task) error

	// SetHeld adds (held true) or releases (held false) the controller's
	// execution hold on t if t.ResourceVersion is current, like
	// UpdateStatus, and sets t.Held and t.ResourceVersion; nothing else
	// changes. Releasing the hold of a task whose deletion was requested
	// completes the deletion. Adding or releasing a hold that is already
	// so changes nothing and succeeds. The errors are those of
	// UpdateStatus.
	SetHeld(ctx context.Context, t *Task, held bool) error
}

// Watcher is implemented by stores that can tell when tasks change, so that
// the controller reacts at once instead of at its next periodic resync.
type Watcher interface {
	// Watch calls notify after tasks may have changed, until ctx is done or
	// the watch fails. It may call notify spuriously. It returns ctx's error
	// or the error that ended the watch; the controller watches again.
	Watch(ctx context.Context, notify func()) error
}

// Informer is implemented by stores that keep a copy of their tasks fed by
// a watch (crt's store, over the manager's informer; memstore). Run then
// keeps the tasks in memory from the changes the store delivers, and a Sync
// acts on the tasks that can change state (pending, running, held,
// being cleaned up, past their TTL) without reading the store: its cost
// grows with the work to do, not with the finished tasks retained. Without
// an Informer, every Sync reads every task with List.
//
// The copy may lag the store, and this is safe: every write is guarded by
// the task's resourceVersion, so a decision made on an old version fails
// with ErrConflict and is made again on the new one; and changes arrive in
// the order the store made them, so a task seen in the copy comes with
// every task created before it (FIFO per target holds as with List;
// Config.Settle covers tasks created concurrently).
type Informer interface {
	// Inform delivers the store's tasks to e, from one goroutine at a time
	// and in the order of their changes: Set for every task present when
	// Inform is called, then Synced, then Set for every task created or
	// changed and Gone for every task deleted, until ctx is done or the
	// watch fails. It returns ctx's error or the error that ended it; the
	// controller informs again from scratch. A task the store cannot read is
	// delivered to Invalid, in place of Set.
	Inform(ctx context.Context, e TaskEvents) error
}

// TaskEvents receives the changes an Informer delivers. Its methods must not
// block; the tasks given to Set belong to the receiver.
type TaskEvents interface {
	Set(t *Task)
	Invalid(namespace, name string, err error)
	Gone(namespace, name string)
	Synced()
}
