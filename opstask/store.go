package opstask

import (
	"context"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

// Informer is implemented by stores that deliver their tasks and then their
// changes, as a list and a watch do (crt's store; memstore). Run then
// keeps the tasks in memory from the changes the store delivers, and a Sync
// acts on the tasks that can change state (pending, running, held,
// being cleaned up, past their TTL) without listing the store: its cost
// grows with the work to do, not with the finished tasks retained. Without
// an Informer, every Sync reads every task with List. A store that is also
// a Getter lets the copy keep finished tasks by reference (see Getter and
// TaskEvents.SetFinished); the task is then read with Get before its
// cleanup.
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
//
// SetFinished delivers, in place of Set, a finished task that is neither
// held, being deleted nor in a cleanup, by what decides when its TTL runs
// out: an Informer may use it so as not to decode the rest of the task (a
// store that retains many finished tasks). Only a store that is also a
// Getter may call it: the controller reads the whole task with Get before
// it acts on it.
type TaskEvents interface {
	Set(t *Task)
	SetFinished(f FinishedTask)
	Invalid(namespace, name string, err error)
	Gone(namespace, name string)
	Synced()
}

// FinishedTask is what the controller keeps of a finished task that is
// neither held, being deleted nor in a cleanup, until its TTL runs out: its
// identity, what its TTL is judged on, and its kind and target.
type FinishedTask struct {
	Namespace, Name, UID, ResourceVersion string
	CreationTimestamp                     time.Time
	// Kind is the member of spec.config, "" when the spec does not have
	// exactly one.
	Kind   string
	Target string
	State  TaskState
	// FinishedAt is status.lastTransitionTime; zero when it has none.
	FinishedAt              time.Time
	TTLSecondsAfterFinished *int32
}

// task returns f as a Task with nothing but the fields f has (its config
// member without a value): enough to judge its TTL, never to write.
func (f FinishedTask) task() *Task {
	t := &Task{Namespace: f.Namespace, Name: f.Name, UID: f.UID, ResourceVersion: f.ResourceVersion,
		CreationTimestamp: f.CreationTimestamp,
		Spec:              Spec{TTLSecondsAfterFinished: f.TTLSecondsAfterFinished, Target: f.Target},
		Status:            Status{State: f.State}}
	if f.Kind != "" {
		t.Spec.Config = map[string]json.RawMessage{f.Kind: nil}
	}
	if !f.FinishedAt.IsZero() {
		t.Status.LastTransitionTime = &metav1.Time{Time: f.FinishedAt}
	}
	return t
}

// Getter is implemented by stores that read one task (crt's store,
// memstore). A controller over an Informer that is also a Getter keeps a
// finished task whose TTL runs out later than a minute from when it
// learns of it by reference only (a FinishedTask, some hundred bytes),
// and reads it whole with Get when its TTL has run out, before it cleans
// it up: its memory does not grow with the finished tasks retained.
type Getter interface {
	// Get returns the task namespace/name, read as List reads, or an error
	// wrapping ErrNotFound when there is none. The task belongs to the
	// caller.
	Get(ctx context.Context, namespace, name string) (*Task, error)
}
