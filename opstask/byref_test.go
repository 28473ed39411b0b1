package opstask_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/memstore"
)

// laggingStore is a memstore whose Informer's events can be held back, as
// a watch that lags the store, and that reports the tasks it reads with
// Get.
type laggingStore struct {
	*memstore.Store
	mu     sync.Mutex
	lag    bool
	queued []func()
	gets   chan string
}

func (s *laggingStore) Inform(ctx context.Context, e opstask.TaskEvents) error {
	return s.Store.Inform(ctx, &laggingEvents{s: s, e: e})
}

func (s *laggingStore) Get(ctx context.Context, namespace, name string) (*opstask.Task, error) {
	t, err := s.Store.Get(ctx, namespace, name)
	select {
	case s.gets <- namespace + "/" + name:
	default:
	}
	return t, err
}

func (s *laggingStore) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lag = true
}

func (s *laggingStore) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.queued {
		f()
	}
	s.queued, s.lag = nil, false
}

type laggingEvents struct {
	s *laggingStore
	e opstask.TaskEvents
}

func (l *laggingEvents) do(f func()) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.lag {
		l.s.queued = append(l.s.queued, f)
		return
	}
	f()
}

func (l *laggingEvents) Set(t *opstask.Task)                { l.do(func() { l.e.Set(t) }) }
func (l *laggingEvents) SetFinished(f opstask.FinishedTask) { l.do(func() { l.e.SetFinished(f) }) }
func (l *laggingEvents) Invalid(ns, name string, err error) {
	l.do(func() { l.e.Invalid(ns, name, err) })
}
func (l *laggingEvents) Gone(ns, name string) { l.do(func() { l.e.Gone(ns, name) }) }
func (l *laggingEvents) Synced()              { l.do(l.e.Synced) }

// A finished task whose TTL runs out more than a minute after the
// controller learns of it is kept by reference only, and read again from
// the store before its cleanup: when the controller's copy lags, the task
// it finds under the name may be another one (deleted and created again),
// or one another controller is cleaning up, and it deletes neither.
func TestFinishedTaskKeptByReferenceIsReadBeforeItsCleanup(t *testing.T) {
	w := newWorld(t)
	store := &laggingStore{Store: w.store, gets: make(chan string, 1000)}
	ctx := t.Context()
	ttl := int32(3600)
	finished := func(name string, ttl int32) *opstask.Task {
		task := &opstask.Task{Namespace: "ns", Name: name, Spec: opstask.Spec{
			Config: map[string]json.RawMessage{"onDemandSnapshot": json.RawMessage(`{"type":"full"}`)}, Target: "etcd", TTLSecondsAfterFinished: &ttl}}
		for _, s := range []opstask.TaskState{opstask.TaskStateInProgress, opstask.TaskStateSucceeded} {
			if err := task.Status.Transition(s, w.clock.Now(), "old-run", "before the test"); err != nil {
				t.Fatal(err)
			}
		}
		task, err := w.store.Create(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	recreated := finished("recreated", ttl)
	claimed := finished("claimed", ttl)
	var cleanups sync.Map // task UID -> number of cleanups
	c, err := opstask.New(opstask.Config{Store: store, Clock: w.clock, Settle: opstask.NoSettle,
		Handlers: []opstask.Handler{{Name: "onDemandSnapshot", AllowDuplicates: true,
			Executor: opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil }),
			Cleanup: func(_ context.Context, task *opstask.Task) error {
				n, _ := cleanups.LoadOrStore(task.UID, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
				return nil
			}}}})
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(t, ctx, c)
	// A task run to the end: the controller's copy holds the finished ones.
	w.create("probe", "other", map[string]any{"onDemandSnapshot": map[string]any{"type": "full"}})
	w.waitState("probe", opstask.TaskStateSucceeded)

	// Behind the copy's back: "recreated" is deleted and created again
	// (finished, with a longer TTL), and another controller claims the
	// cleanup of "claimed" just before its TTL runs out.
	store.hold()
	if err := w.store.Delete(ctx, w.get("recreated")); err != nil {
		t.Fatal(err)
	}
	again := finished("recreated", 2*ttl)
	if again.UID == recreated.UID {
		t.Fatal("the task created again has the old UID")
	}
	w.clock.Step(time.Duration(ttl)*time.Second - 10*time.Second)
	other := w.get("claimed")
	if err := other.Status.Cleanup(w.clock.Now(), opstask.LastOperationStateInProgress, "other-run", "another controller"); err != nil {
		t.Fatal(err)
	}
	if err := w.store.UpdateStatus(ctx, other); err != nil {
		t.Fatal(err)
	}
	// Past the TTL of both as the copy knows them: the controller reads
	// each before it acts.
	read := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for !read["ns/recreated"] || !read["ns/claimed"] {
		w.clock.Step(time.Second)
		for drained := false; !drained; {
			select {
			case key := <-store.gets:
				read[key] = true
			default:
				drained = true
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller read %v past the TTL, want ns/recreated and ns/claimed", read)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := w.get("recreated"); got.UID != again.UID {
		t.Errorf("recreated: UID %s, want the new task's %s", got.UID, again.UID)
	}
	if got := w.get("claimed"); got.Status.LastOperation.RunID != "other-run" {
		t.Errorf("claimed: the cleanup claim of another controller was taken over: %+v", got.Status.LastOperation)
	}
	for _, uid := range []string{recreated.UID, again.UID, claimed.UID} {
		if n, ok := cleanups.Load(uid); ok {
			t.Errorf("cleanup of task %s ran %d times while it was not the controller's to clean up", uid, n.(*atomic.Int64).Load())
		}
	}

	// Once the copy catches up, "claimed" is taken over when its claim
	// lapsed and is cleaned up once; "recreated" waits for its own TTL.
	store.release()
	deadline = time.Now().Add(20 * time.Second)
	for {
		_, err := w.store.Get(ctx, "ns", "claimed")
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("claimed: not cleaned up after its claim lapsed")
		}
		w.clock.Step(time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	if n, _ := cleanups.Load(claimed.UID); n == nil || n.(*atomic.Int64).Load() != 1 {
		t.Errorf("claimed: cleaned up %v times, want 1", n)
	}
	if got := w.get("recreated"); got.UID != again.UID {
		t.Errorf("recreated: UID %s, want the new task's %s", got.UID, again.UID)
	}
}
