package opstask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/memstore"
)

// listCounter is a memstore (an opstask.Informer) that counts its Lists.
type listCounter struct {
	*memstore.Store
	lists atomic.Int64
}

func (s *listCounter) List(ctx context.Context) ([]*opstask.Task, error) {
	s.lists.Add(1)
	return s.Store.List(ctx)
}

// A controller over an Informer runs new tasks and deletes retained
// finished tasks when their TTL runs out without listing the store once:
// it decides on the copy the informer feeds, and a timer on the earliest
// expiry, not a rescan, finds the expired tasks.
func TestRunOnAnInformerListsNothing(t *testing.T) {
	w := newWorld(t)
	store := &listCounter{Store: w.store}
	ctx := t.Context()
	const retained = 300
	for i := range retained {
		ttl := int32(60)
		if i%2 == 1 {
			ttl = 600
		}
		task := &opstask.Task{Namespace: "ns", Name: fmt.Sprintf("done-%03d", i),
			Spec: opstask.Spec{Config: map[string]json.RawMessage{"onDemandSnapshot": json.RawMessage(`{"type":"full"}`)}, Target: fmt.Sprintf("etcd-%d", i%7), TTLSecondsAfterFinished: &ttl}}
		for _, s := range []opstask.TaskState{opstask.TaskStateInProgress, opstask.TaskStateSucceeded} {
			if err := task.Status.Transition(s, w.clock.Now(), "old-run", "before the test"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.store.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		w.create(fmt.Sprintf("new-%d", i), fmt.Sprintf("etcd-%d", i%2), map[string]any{"onDemandSnapshot": map[string]any{"type": "full"}})
	}
	c, err := opstask.New(opstask.Config{Store: store, Clock: w.clock, Settle: opstask.NoSettle,
		ResyncPeriod: 24 * time.Hour, DefaultTTL: time.Hour,
		Handlers: []opstask.Handler{{Name: "onDemandSnapshot", AllowDuplicates: true,
			Executor: opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })}}})
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(t, ctx, c)
	for i := range 5 {
		w.waitState(fmt.Sprintf("new-%d", i), opstask.TaskStateSucceeded)
	}
	count := func() int {
		l, err := w.store.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	if n := count(); n != retained+5 {
		t.Fatalf("%d tasks before any TTL ran out, want %d", n, retained+5)
	}
	// Past the TTL of the new tasks (an hour by default) and of the first
	// half of the retained ones (60 s), not of the second half (600 s).
	want := retained / 2
	deadline := time.Now().Add(20 * time.Second)
	for stepped := time.Duration(0); ; {
		if stepped < 62*time.Second {
			w.clock.Step(time.Second)
			stepped += time.Second
		}
		if stepped >= 62*time.Second && count() == want+5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks left 62 s on, want %d (those with a TTL of 600 s, and the new ones, an hour)", count(), want+5)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := range retained {
		_, err := w.store.Get(ctx, "ns", fmt.Sprintf("done-%03d", i))
		if gone := err != nil; gone != (i%2 == 0) {
			t.Errorf("task done-%03d (TTL %ds): gone %v, want %v", i, map[bool]int{true: 60, false: 600}[i%2 == 0], gone, i%2 == 0)
		}
	}
	if n := store.lists.Load(); n != 0 {
		t.Errorf("the controller listed the store %d times, want 0", n)
	}
}
