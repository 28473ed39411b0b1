package opstask_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// hangingStore wraps a real store. Once hang is set, its UpdateStatus
// blocks until the write's context is done, as a write to an API server
// that stopped answering does (client-go has no request timeout by
// default); it reports each write that hangs on hung and each that returned
// on returned.
type hangingStore struct {
	opstask.Store
	hang     atomic.Bool
	hung     chan struct{}
	returned chan error
}

func newHangingStore(s opstask.Store) *hangingStore {
	return &hangingStore{Store: s, hung: make(chan struct{}, 16), returned: make(chan error, 16)}
}

func (s *hangingStore) UpdateStatus(ctx context.Context, t *opstask.Task) error {
	if !s.hang.Load() {
		return s.Store.UpdateStatus(ctx, t)
	}
	s.hung <- struct{}{}
	<-ctx.Done()
	err := fmt.Errorf("hanging store: update status of %s: %w", t.Key(), context.Cause(ctx))
	s.returned <- err
	return err
}

// receive waits (in real time, bounded) for a value on ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s: nothing after a minute (real time)", what)
		panic("unreachable")
	}
}

// stopController cancels ctx's executions and waits for them: Run on a
// canceled context returns once its executions returned.
func stopController(c *opstask.Controller, stop context.CancelFunc) {
	stop()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = c.Run(ctx)
}

// A write that hangs inside the lease loop (a renewal, or a progress report
// of the executor) must not keep the executor running: the claim counts as
// confirmed only for 2/3 of the lease after the last write that succeeded,
// and the executor is canceled then, on time, although the write has not
// returned; another controller takes the task over only after the lease.
func TestHungWriteInTheLeaseLoop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		progress bool // the executor's own progress report hangs
	}{
		{"renewal write that hangs past 2/3 of the lease cancels the executor before another controller takes over", false},
		{"progress report that hangs past 2/3 of the lease cancels the executor before another controller takes over", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			lease := 30 * time.Second
			hs := newHangingStore(w.store)
			var (
				mu      sync.Mutex
				running int
			)
			started := make(chan string, 4)
			canceled := make(chan error, 4)
			reportNow := make(chan struct{})
			exec := opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) error {
				mu.Lock()
				running++
				if running > 1 {
					t.Errorf("run %s of %s starts while another execution of it runs", run.ID, run.Task.Name)
				}
				mu.Unlock()
				started <- run.ID
				if tc.progress && strings.HasPrefix(run.ID, "a-") {
					<-reportNow
					_ = run.Progress(ctx, "copied 1 of 1000 backups")
				}
				<-ctx.Done()
				mu.Lock()
				running--
				mu.Unlock()
				canceled <- context.Cause(ctx)
				return context.Cause(ctx)
			})
			kinds := []opstask.Handler{{Name: "copy", Executor: exec, Resumable: true}}
			a, err := opstask.New(opstask.Config{Store: hs, Clock: w.clock, Identity: "a", LeaseDuration: lease, Settle: opstask.NoSettle, Handlers: kinds})
			if err != nil {
				t.Fatal(err)
			}
			b := w.controller(opstask.Config{Identity: "b", LeaseDuration: lease, Handlers: kinds})
			w.create("copy-1", "", map[string]any{"copy": map[string]any{}})
			ctxA, stopA := context.WithCancel(t.Context())
			defer stopController(a, stopA)
			ctxB, stopB := context.WithCancel(t.Context())
			defer stopController(b, stopB)

			if _, err := a.Sync(ctxA); err != nil {
				t.Fatal(err)
			}
			if id := receive(t, started, "controller a starts the task"); !strings.HasPrefix(id, "a-") {
				t.Fatalf("run %s started, want one of a", id)
			}
			claimedAt := w.clock.Now()
			w.sync(ctxB, b) // b sees the task InProgress: its lease starts now

			hs.hang.Store(true)
			if tc.progress {
				close(reportNow)
			} else {
				w.clock.Step(lease / 3) // a's renewal is due
			}
			receive(t, hs.hung, "a's write to hang")
			w.clock.SetTime(claimedAt.Add(lease * 2 / 3))
			if cause := receive(t, canceled, "a's executor to be canceled at 2/3 of the lease while its write hangs"); !errors.Is(cause, opstask.ErrLostClaim) {
				t.Errorf("a's executor canceled with %v, want ErrLostClaim", cause)
			}
			t.Logf("the hung write returned: %v", receive(t, hs.returned, "the hung write to give up at its deadline"))
			if got := w.get("copy-1").Status.LastOperation.RunID; !strings.HasPrefix(got, "a-") {
				t.Fatalf("task claimed by %s before b took over", got)
			}

			w.clock.SetTime(claimedAt.Add(lease))
			w.sync(ctxB, b)
			if id := receive(t, started, "controller b takes the task over after the lease"); !strings.HasPrefix(id, "b-") {
				t.Fatalf("run %s started, want one of b", id)
			}
			if got := w.get("copy-1"); got.State() != opstask.TaskStateInProgress || !strings.HasPrefix(got.Status.LastOperation.RunID, "b-") {
				t.Errorf("after the takeover: %s by %s, want InProgress by b", got.State(), got.Status.LastOperation.RunID)
			}
		})
	}
}

// A cleanup is claimed like an execution: while one controller runs a
// task's Cleanup and renews its claim, another leaves the task alone; it
// takes the cleanup over only after the claim lapsed for LeaseDuration.
func TestCleanupIsClaimed(t *testing.T) {
	t.Run("cleanup another controller runs is not run again until its claim lapses", func(t *testing.T) {
		w := newWorld(t)
		lease := 30 * time.Second
		var running atomic.Int32
		calls := make(chan string, 8)
		release := make(chan error)
		cleanup := func(ctx context.Context, task *opstask.Task) error {
			if running.Add(1) > 1 {
				t.Errorf("two cleanups of %s run at once (the second by %s)", task.Name, task.Status.LastOperation.RunID)
			}
			defer running.Add(-1)
			calls <- task.Status.LastOperation.RunID
			select {
			case err := <-release:
				return err
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		nop := opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })
		kinds := []opstask.Handler{{Name: "job", Executor: nop, Cleanup: cleanup}}
		a := w.controller(opstask.Config{Identity: "a", LeaseDuration: lease, DefaultTTL: time.Hour, Handlers: kinds})
		b := w.controller(opstask.Config{Identity: "b", LeaseDuration: lease, DefaultTTL: time.Hour, Handlers: kinds})
		w.create("job-1", "", map[string]any{"job": map[string]any{}})
		ctxA, stopA := context.WithCancel(t.Context())
		defer stopController(a, stopA)
		ctxB, stopB := context.WithCancel(t.Context())
		defer stopController(b, stopB)
		w.sync(ctxA, a)
		end := w.waitState("job-1", opstask.TaskStateSucceeded).Status.LastTransitionTime.Time
		w.clock.SetTime(end.Add(time.Hour + time.Second)) // past the TTL

		type result struct {
			next time.Duration
			err  error
		}
		syncing := func(c *opstask.Controller, ctx context.Context) <-chan result {
			ch := make(chan result, 1)
			go func() {
				d, err := c.Sync(ctx)
				ch <- result{d, err}
			}()
			return ch
		}
		aDone := syncing(a, ctxA)
		if id := receive(t, calls, "a to start the cleanup"); !strings.HasPrefix(id, "a-") {
			t.Fatalf("cleanup started by run %s, want one of a", id)
		}
		// b reads the task while a cleans it up, and a renews its claim.
		for i := range 6 {
			select {
			case id := <-calls:
				t.Fatalf("b runs the cleanup (run %s) while a runs it", id)
			case r := <-syncing(b, ctxB):
				if r.err != nil || r.next != lease {
					t.Fatalf("b's Sync %d during a's cleanup: next %s, error %v; want the lease %s, nil", i, r.next, r.err, lease)
				}
			}
			w.clock.Step(lease / 3)
			w.waitRenewed("job-1")
		}
		if lo := w.get("job-1").Status.LastOperation; lo.Type != opstask.LastOperationTypeCleanup || lo.State != opstask.LastOperationStateInProgress || !strings.HasPrefix(lo.RunID, "a-") {
			t.Fatalf("during a's cleanup: lastOperation %+v", lo)
		}

		// a stops mid-cleanup; its claim lapses one lease after its last
		// renewal, as b measures it.
		stopA()
		if r := receive(t, aDone, "a's Sync to return after a stopped"); !errors.Is(r.err, context.Canceled) {
			t.Errorf("a's Sync returned %v, want context.Canceled", r.err)
		}
		if r := receive(t, syncing(b, ctxB), "b's Sync"); r.err != nil || r.next != lease {
			t.Fatalf("b's Sync after a stopped: next %s, error %v; want the lease %s, nil", r.next, r.err, lease)
		}
		w.clock.Step(lease - time.Nanosecond)
		if r := receive(t, syncing(b, ctxB), "b's Sync"); r.err != nil || r.next != time.Nanosecond {
			t.Fatalf("b's Sync 1ns before the lease lapses: next %s, error %v; want 1ns, nil", r.next, r.err)
		}
		w.clock.Step(time.Nanosecond)
		bDone := syncing(b, ctxB)
		if id := receive(t, calls, "b to take the cleanup over"); !strings.HasPrefix(id, "b-") {
			t.Fatalf("cleanup taken over by run %s, want one of b", id)
		}
		release <- nil
		if r := receive(t, bDone, "b's Sync"); r.err != nil {
			t.Fatalf("b's Sync: %v", r.err)
		}
		if _, err := w.store.Get(t.Context(), "ns", "job-1"); !errors.Is(err, opstask.ErrNotFound) {
			t.Errorf("after b's cleanup: task still there (%v)", err)
		}
	})
}
