package opstask_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// A task deleted while it runs keeps its target busy until no executor of
// it can be running. When its controller is gone, another controller
// releases its hold only after nobody wrote it for LeaseDuration (when a
// takeover would be allowed), never resumes it, and only then starts the
// next task of the target.
func TestDeletedTaskOfAStoppedController(t *testing.T) {
	w := newWorld(t)
	lease := 30 * time.Second
	g := newGate()
	kinds := []opstask.Handler{{Name: "copy", Executor: g, Resumable: true}}
	a := w.controller(opstask.Config{Identity: "a", LeaseDuration: lease, Handlers: kinds})
	b := w.controller(opstask.Config{Identity: "b", LeaseDuration: lease, Handlers: kinds})
	w.create("copy-1", "etcd-main", map[string]any{"copy": map[string]any{}})
	w.create("copy-2", "etcd-main", map[string]any{"copy": map[string]any{"n": 2}})

	ctxA, stopA := context.WithCancel(t.Context())
	w.sync(ctxA, a)
	w.waitStarted(g, "copy-1")
	running := w.get("copy-1")
	if !running.Held || running.State() != opstask.TaskStateInProgress {
		t.Fatalf("a running task: Held %v, state %s; want held, InProgress", running.Held, running.State())
	}
	stopController(a, stopA) // a is gone; copy-1 stays InProgress, held

	if err := w.store.Delete(t.Context(), w.get("copy-1")); err != nil {
		t.Fatalf("delete copy-1: %v", err)
	}
	ctxB, stopB := context.WithCancel(t.Context())
	defer stopController(b, stopB)
	seenAt := w.clock.Now()
	if next := w.sync(ctxB, b); next != lease {
		t.Errorf("b's first Sync after the delete: next in %s, want the lease %s", next, lease)
	}
	w.clock.SetTime(seenAt.Add(lease - time.Second))
	w.sync(ctxB, b)
	got := w.get("copy-1")
	if !got.Deleting || !got.Held {
		t.Fatalf("copy-1 before the lease ran out: Deleting %v, Held %v; want both", got.Deleting, got.Held)
	}
	if st := w.get("copy-2").State(); st != opstask.TaskStatePending {
		t.Fatalf("copy-2 is %s while the deleted copy-1 may still run; want Pending", st)
	}

	w.clock.SetTime(seenAt.Add(lease))
	w.sync(ctxB, b)
	if _, err := w.store.Get(t.Context(), "ns", "copy-1"); err == nil {
		t.Fatal("copy-1 still exists after b released its hold")
	}
	w.sync(ctxB, b)
	w.waitStarted(g, "copy-2")
	if started := g.startedList(); !slices.Equal(started, []string{"copy-1", "copy-2"}) {
		t.Errorf("executions started: %v; want copy-1 (by a) then copy-2, and the deleted copy-1 never resumed", started)
	}
}

// A pending task whose deletion was requested is never started; a hold on
// it (none of the controller's making) is released.
func TestDeletingPendingTaskIsNotStarted(t *testing.T) {
	w := newWorld(t)
	g := newGate()
	c := w.controller(opstask.Config{Handlers: []opstask.Handler{{Name: "copy", Executor: g}}})
	task := w.create("copy-1", "etcd-main", map[string]any{"copy": map[string]any{}})
	if err := w.store.SetHeld(t.Context(), task, true); err != nil {
		t.Fatal(err)
	}
	if err := w.store.Delete(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	defer stopController(c, stop)
	w.sync(ctx, c)
	if _, err := w.store.Get(t.Context(), "ns", "copy-1"); err == nil {
		t.Fatal("the pending task being deleted is still there after a Sync")
	}
	w.sync(ctx, c)
	if started := g.startedList(); len(started) != 0 {
		t.Fatalf("executions started: %v; want none", started)
	}
}
