package opstasktest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// Harness is one subtest's store.
type Harness struct {
	// Store is the store under test; it must start empty.
	Store opstask.Store
	// Create creates a task with t's Name and Spec in the harness's
	// namespace, as users do, and returns it as stored, with UID,
	// ResourceVersion and CreationTimestamp set.
	Create func(ctx context.Context, t *opstask.Task) (*opstask.Task, error)
	// Members are two config member names the store accepts, with a valid
	// value for each. Default: "alpha" and "beta", both {}.
	Members [2]Member
	// Approve adds token to the approvals of the task name in the
	// harness's namespace, as a person does (in a Kubernetes store, the
	// annotation opstask.ApprovalAnnotation). Nil leaves out the test of
	// an approval gate.
	Approve func(ctx context.Context, name, token string) error
}

// Member is a config member name and a valid value for it.
type Member struct {
	Name   string
	Config json.RawMessage
}

func (h *Harness) defaults() {
	if h.Members[0].Name == "" {
		h.Members = [2]Member{{"alpha", json.RawMessage(`{}`)}, {"beta", json.RawMessage(`{}`)}}
	}
}

// task returns a task named name with member i (0 or 1) set.
func (h Harness) task(name string, i int, target string) *opstask.Task {
	m := h.Members[i]
	return &opstask.Task{Name: name, Spec: opstask.Spec{Config: map[string]json.RawMessage{m.Name: m.Config}, Target: target}}
}

// epoch is a whole second, for timestamps that survive a round trip.
var epoch = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// Run runs the suite.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"created task is listed with identity and spec", testCreateList},
		{"status round-trips and bumps the version", testStatusRoundTrip},
		{"status update with a stale version conflicts and writes nothing", testStaleUpdate},
		{"status update does not change the spec", testUpdateKeepsSpec},
		{"status update of a missing task is not found", testUpdateMissing},
		{"delete with a stale version conflicts; current deletes; again is not found", testDelete},
		{"delete of a recreated task with the old UID fails", testDeleteRecreated},
		{"a held task survives delete until its hold is released", testHold},
		{"of concurrent claims on one read exactly one wins", testConcurrentClaims},
		{"watch notifies after a change", testWatch},
		{"controller runs tasks per target in queue order", testControllerOrder},
		{"a task deleted while it runs keeps its target until its executor returned", testControllerDeleteRunning},
		{"a step gated by an approval of its own name runs once, after the approval", testControllerApprovalGate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if h.Store == nil || h.Create == nil {
				t.Fatal("harness has no Store or no Create")
			}
			h.defaults()
			tc.fn(t, h)
		})
	}
}

func create(t *testing.T, h Harness, task *opstask.Task) *opstask.Task {
	t.Helper()
	got, err := h.Create(t.Context(), task)
	if err != nil {
		t.Fatalf("create %s: %v", task.Name, err)
	}
	if got.UID == "" || got.ResourceVersion == "" || got.CreationTimestamp.IsZero() {
		t.Fatalf("created task %s lacks UID (%q), ResourceVersion (%q) or CreationTimestamp (%v)", got.Name, got.UID, got.ResourceVersion, got.CreationTimestamp)
	}
	return got
}

func list(t *testing.T, h Harness) map[string]*opstask.Task {
	t.Helper()
	tasks, err := h.Store.List(t.Context())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	m := make(map[string]*opstask.Task, len(tasks))
	for _, task := range tasks {
		if _, dup := m[task.Name]; dup {
			t.Fatalf("List returned %s twice", task.Name)
		}
		m[task.Name] = task
	}
	return m
}

// specJSON normalizes a spec for comparison: raw config members decoded.
func specJSON(s opstask.Spec) map[string]any {
	cfg := map[string]any{}
	for k, v := range s.Config {
		var x any
		_ = json.Unmarshal(v, &x)
		cfg[k] = x
	}
	var ttl any
	if s.TTLSecondsAfterFinished != nil {
		ttl = *s.TTLSecondsAfterFinished
	}
	return map[string]any{"config": cfg, "ttl": ttl, "target": s.Target}
}

func testCreateList(t *testing.T, h Harness) {
	ttl := int32(90)
	a := h.task("conf-a", 0, "etcd-main")
	a.Spec.TTLSecondsAfterFinished = &ttl
	a.Approvals = []string{"restore/0a1b2c3d4e", "scale/5f6a7b8c9d"}
	b := h.task("conf-b", 1, "")
	ca, cb := create(t, h, a), create(t, h, b)
	got := list(t, h)
	if len(got) != 2 {
		t.Fatalf("List returned %d tasks, want 2", len(got))
	}
	for _, want := range []*opstask.Task{ca, cb} {
		g := got[want.Name]
		if g == nil {
			t.Fatalf("List lacks %s", want.Name)
		}
		if g.UID != want.UID || g.ResourceVersion != want.ResourceVersion || !g.CreationTimestamp.Equal(want.CreationTimestamp) || g.Namespace != want.Namespace {
			t.Errorf("%s: listed identity (%s %s %s %v) differs from created (%s %s %s %v)", want.Name,
				g.Namespace, g.UID, g.ResourceVersion, g.CreationTimestamp, want.Namespace, want.UID, want.ResourceVersion, want.CreationTimestamp)
		}
		if g.State() != opstask.TaskStatePending {
			t.Errorf("%s: new task state %q, want Pending", want.Name, g.State())
		}
	}
	if d := cmp.Diff(specJSON(ca.Spec), specJSON(got["conf-a"].Spec)); d != "" {
		t.Errorf("conf-a spec (-created +listed):\n%s", d)
	}
	if d := cmp.Diff(specJSON(cb.Spec), specJSON(got["conf-b"].Spec)); d != "" {
		t.Errorf("conf-b spec (-created +listed):\n%s", d)
	}
	if ca.Spec.Target != "etcd-main" || cb.Spec.Target != "" || ca.Spec.TTLSecondsAfterFinished == nil || *ca.Spec.TTLSecondsAfterFinished != 90 || cb.Spec.TTLSecondsAfterFinished != nil {
		t.Errorf("created specs lost target or TTL: %+v, %+v", ca.Spec, cb.Spec)
	}
	if d := cmp.Diff(a.Approvals, got["conf-a"].Approvals); d != "" {
		t.Errorf("conf-a approvals (-created +listed):\n%s", d)
	}
	if len(got["conf-b"].Approvals) != 0 {
		t.Errorf("conf-b approvals %q, want none", got["conf-b"].Approvals)
	}
	if kind := got["conf-a"].Kind(); kind != h.Members[0].Name {
		t.Errorf("conf-a kind %q, want %s", kind, h.Members[0].Name)
	}
	if kind := got["conf-b"].Kind(); kind != h.Members[1].Name {
		t.Errorf("conf-b kind %q, want %s", kind, h.Members[1].Name)
	}
}

// fullStatus exercises every status field.
func fullStatus(t *testing.T) opstask.Status {
	t.Helper()
	var s opstask.Status
	if err := s.Transition(opstask.TaskStateInProgress, epoch, "run-1", "started"); err != nil {
		t.Fatal(err)
	}
	if err := s.Progress(epoch.Add(5*time.Second), "run-1", "copied 3 of 7 backups"); err != nil {
		t.Fatal(err)
	}
	s.AddError("Flaky", "object store answered 503", epoch.Add(3*time.Second))
	s.Steps = []opstask.Step{
		{Name: "plan", State: opstask.StepStateCompleted, Description: "restore from Full-1-20", Result: `{"rev":20}`, Attempts: 1, RunID: "run-1", LastUpdateTime: metav1.NewTime(epoch.Add(time.Second))},
		{Name: "restore", State: opstask.StepStateInProgress, Description: "started", Attempts: 2, RunID: "run-1", LastUpdateTime: metav1.NewTime(epoch.Add(4 * time.Second))},
	}
	// An approval of the step of the same name, kept apart from it.
	s.Approvals = []opstask.Approval{
		{Step: "restore", State: opstask.ApprovalStateApproved, Description: "approved (restore/0a1b2c3d4e): restore from Full-1-20", Token: "restore/0a1b2c3d4e", RunID: "run-1", LastUpdateTime: metav1.NewTime(epoch.Add(2 * time.Second))},
	}
	s.StartedWith = &opstask.StartedWith{Kind: "alpha", ConfigDigest: "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", Target: "etcd-main"}
	return s
}

func testStatusRoundTrip(t *testing.T, h Harness) {
	task := create(t, h, h.task("conf-status", 0, "etcd-main"))
	before := task.ResourceVersion
	task.Status = fullStatus(t)
	if err := h.Store.UpdateStatus(t.Context(), task); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	if task.ResourceVersion == before {
		t.Errorf("UpdateStatus left ResourceVersion at %s", before)
	}
	got := list(t, h)["conf-status"]
	if got.ResourceVersion != task.ResourceVersion {
		t.Errorf("listed version %s, UpdateStatus returned %s", got.ResourceVersion, task.ResourceVersion)
	}
	if d := cmp.Diff(task.Status, got.Status, cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) })); d != "" {
		t.Errorf("status (-written +listed):\n%s", d)
	}
}

func testStaleUpdate(t *testing.T, h Harness) {
	task := create(t, h, h.task("conf-stale", 0, "etcd-main"))
	stale := task.DeepCopy()
	task.Status = fullStatus(t)
	if err := h.Store.UpdateStatus(t.Context(), task); err != nil {
		t.Fatalf("first UpdateStatus: %v", err)
	}
	if err := stale.Status.Transition(opstask.TaskStateRejected, epoch, "run-2", "rejected"); err != nil {
		t.Fatal(err)
	}
	err := h.Store.UpdateStatus(t.Context(), stale)
	if !errors.Is(err, opstask.ErrConflict) {
		t.Fatalf("UpdateStatus with stale version: got %v, want ErrConflict", err)
	}
	if got := list(t, h)["conf-stale"]; got.State() != opstask.TaskStateInProgress || got.ResourceVersion != task.ResourceVersion {
		t.Errorf("after the conflict: state %s at %s, want InProgress at %s", got.State(), got.ResourceVersion, task.ResourceVersion)
	}
}

func testUpdateKeepsSpec(t *testing.T, h Harness) {
	task := create(t, h, h.task("conf-spec", 0, "etcd-main"))
	want := specJSON(task.Spec)
	if len(task.Spec.Config) != 1 {
		t.Fatalf("created task has config %v", task.Spec.Config)
	}
	task.Spec = h.task("x", 1, "other").Spec
	task.Status = fullStatus(t)
	if err := h.Store.UpdateStatus(t.Context(), task); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	if d := cmp.Diff(want, specJSON(list(t, h)["conf-spec"].Spec)); d != "" {
		t.Errorf("UpdateStatus changed the spec (-before +after):\n%s", d)
	}
}

func testUpdateMissing(t *testing.T, h Harness) {
	task := create(t, h, h.task("conf-missing", 0, ""))
	if err := h.Store.Delete(t.Context(), task); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	task.Status = fullStatus(t)
	err := h.Store.UpdateStatus(t.Context(), task)
	if !errors.Is(err, opstask.ErrNotFound) {
		t.Fatalf("UpdateStatus of a deleted task: got %v, want ErrNotFound", err)
	}
}

func testDelete(t *testing.T, h Harness) {
	task := create(t, h, h.task("conf-delete", 0, ""))
	stale := task.DeepCopy()
	task.Status = fullStatus(t)
	if err := h.Store.UpdateStatus(t.Context(), task); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	if err := h.Store.Delete(t.Context(), stale); !errors.Is(err, opstask.ErrConflict) {
		t.Fatalf("Delete with stale version: got %v, want ErrConflict", err)
	}
	if _, ok := list(t, h)["conf-delete"]; !ok {
		t.Fatal("a refused Delete removed the task")
	}
	if err := h.Store.Delete(t.Context(), task); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, ok := list(t, h)["conf-delete"]; ok {
		t.Fatal("deleted task is still listed")
	}
	if err := h.Store.Delete(t.Context(), task); !errors.Is(err, opstask.ErrNotFound) {
		t.Fatalf("second Delete: got %v, want ErrNotFound", err)
	}
}

func testDeleteRecreated(t *testing.T, h Harness) {
	old := create(t, h, h.task("conf-recreated", 0, ""))
	if err := h.Store.Delete(t.Context(), old); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	fresh := create(t, h, h.task("conf-recreated", 0, ""))
	if fresh.UID == old.UID {
		t.Fatalf("recreated task has the old UID %s", old.UID)
	}
	err := h.Store.Delete(t.Context(), old)
	if !errors.Is(err, opstask.ErrConflict) && !errors.Is(err, opstask.ErrNotFound) {
		t.Fatalf("Delete with the old UID: got %v, want ErrConflict or ErrNotFound", err)
	}
	old.Status = fullStatus(t)
	err = h.Store.UpdateStatus(t.Context(), old)
	if !errors.Is(err, opstask.ErrConflict) && !errors.Is(err, opstask.ErrNotFound) {
		t.Fatalf("UpdateStatus with the old UID: got %v, want ErrConflict or ErrNotFound", err)
	}
	err = h.Store.SetHeld(t.Context(), old, true)
	if !errors.Is(err, opstask.ErrConflict) && !errors.Is(err, opstask.ErrNotFound) {
		t.Fatalf("SetHeld with the old UID: got %v, want ErrConflict or ErrNotFound", err)
	}
	if got := list(t, h)["conf-recreated"]; got == nil || got.UID != fresh.UID || got.State() != opstask.TaskStatePending || got.Held {
		t.Fatalf("the recreated task was touched: %+v", got)
	}
}

func testConcurrentClaims(t *testing.T, h Harness) {
	task := create(t, h, h.task("conf-claims", 0, "etcd-main"))
	const n = 8
	var (
		wins, conflicts atomic.Int32
		wg              sync.WaitGroup
		start           = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := task.DeepCopy()
			if err := c.Status.Transition(opstask.TaskStateInProgress, epoch, fmt.Sprintf("run-%d", i), "claimed"); err != nil {
				t.Error(err)
				return
			}
			<-start
			switch err := h.Store.UpdateStatus(context.Background(), c); {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, opstask.ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("claim %d: %v", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != n-1 {
		t.Fatalf("%d claims won and %d conflicted, want 1 and %d", wins.Load(), conflicts.Load(), n-1)
	}
}

func testWatch(t *testing.T, h Harness) {
	w, ok := h.Store.(opstask.Watcher)
	if !ok {
		t.Skip("store does not implement opstask.Watcher")
	}
	ctx, cancel := context.WithCancel(t.Context())
	notified := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- w.Watch(ctx, func() {
			select {
			case notified <- struct{}{}:
			default:
			}
		})
	}()
	// The watch may start after the first change: keep changing until
	// notified, within a deadline.
	task := create(t, h, h.task("conf-watch", 0, ""))
	deadline := time.After(30 * time.Second)
	for i := 0; ; i++ {
		select {
		case <-notified:
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Watch returned %v after cancel, want context.Canceled", err)
			}
			return
		case <-deadline:
			cancel()
			t.Fatal("no notification 30s after changes")
		case <-time.After(200 * time.Millisecond):
			task.Status = opstask.Status{}
			task.Status.AddError("Tick", fmt.Sprint(i), epoch)
			if err := h.Store.UpdateStatus(t.Context(), task); err != nil {
				t.Fatalf("UpdateStatus: %v", err)
			}
		}
	}
}

func testControllerOrder(t *testing.T, h Harness) {
	names := []string{"conf-q-c", "conf-q-a", "conf-q-d", "conf-q-b", "conf-q-f", "conf-q-e"}
	for i, n := range names {
		create(t, h, h.task(n, 0, fmt.Sprintf("target-%d", i%2)))
	}
	var (
		mu      sync.Mutex
		order   = map[string][]string{}
		running = map[string]int{}
	)
	exec := opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) error {
		tgt := run.Task.Spec.Target
		mu.Lock()
		running[tgt]++
		if running[tgt] > 1 {
			t.Errorf("two tasks of %s run at once", tgt)
		}
		order[tgt] = append(order[tgt], run.Task.Name)
		mu.Unlock()
		if err := run.Progress(ctx, "halfway"); err != nil {
			return err
		}
		mu.Lock()
		running[tgt]--
		mu.Unlock()
		return nil
	})
	startController(t, h, opstask.Config{
		Handlers:   []opstask.Handler{{Name: h.Members[0].Name, Executor: exec, AllowDuplicates: true}},
		Settle:     opstask.NoSettle,
		DefaultTTL: time.Hour,
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		tasks := list(t, h)
		finished := 0
		for _, task := range tasks {
			if task.State().Finished() {
				finished++
			}
		}
		if finished == len(names) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks finished after 60s", finished, len(names))
		}
		time.Sleep(50 * time.Millisecond)
	}
	tasks := list(t, h)
	want := map[string][]string{}
	var sorted []*opstask.Task
	for _, task := range tasks {
		if task.State() != opstask.TaskStateSucceeded {
			t.Errorf("%s ended %s, want Succeeded: %+v", task.Name, task.State(), task.Status.LastErrors)
		}
		sorted = append(sorted, task)
	}
	opstask.SortTasks(sorted)
	for _, task := range sorted {
		want[task.Spec.Target] = append(want[task.Spec.Target], task.Name)
	}
	mu.Lock()
	defer mu.Unlock()
	if d := cmp.Diff(want, order); d != "" {
		t.Errorf("execution order per target (-queue order +executed):\n%s", d)
	}
}

func testHold(t *testing.T, h Harness) {
	ctx := t.Context()
	task := create(t, h, h.task("conf-hold", 0, "etcd-main"))
	if task.Held || task.Deleting {
		t.Fatalf("a new task is held (%v) or deleting (%v)", task.Held, task.Deleting)
	}
	stale := task.DeepCopy()
	task.Status = fullStatus(t)
	if err := h.Store.UpdateStatus(ctx, task); err != nil {
		t.Fatalf("UpdateStatus: %v", err)
	}
	if err := h.Store.SetHeld(ctx, stale, true); !errors.Is(err, opstask.ErrConflict) {
		t.Fatalf("SetHeld with a stale version: got %v, want ErrConflict", err)
	}
	if list(t, h)["conf-hold"].Held {
		t.Fatal("a refused SetHeld held the task")
	}
	before := task.ResourceVersion
	if err := h.Store.SetHeld(ctx, task, true); err != nil {
		t.Fatalf("SetHeld(true): %v", err)
	}
	if !task.Held || task.ResourceVersion == before {
		t.Fatalf("SetHeld(true) left Held %v and ResourceVersion %s (was %s)", task.Held, task.ResourceVersion, before)
	}
	got := list(t, h)["conf-hold"]
	if !got.Held || got.Deleting || got.ResourceVersion != task.ResourceVersion || got.State() != opstask.TaskStateInProgress {
		t.Fatalf("held task listed as Held %v, Deleting %v, version %s (SetHeld returned %s), state %s",
			got.Held, got.Deleting, got.ResourceVersion, task.ResourceVersion, got.State())
	}
	again := task.ResourceVersion
	if err := h.Store.SetHeld(ctx, task, true); err != nil || task.ResourceVersion != again {
		t.Fatalf("SetHeld(true) on a held task: %v, version %s (was %s); want no error and no change", err, task.ResourceVersion, again)
	}
	task.Status.AddError("StillHeld", "a status write keeps the hold", epoch)
	if err := h.Store.UpdateStatus(ctx, task); err != nil {
		t.Fatalf("UpdateStatus of a held task: %v", err)
	}
	if !list(t, h)["conf-hold"].Held {
		t.Fatal("a status write dropped the hold")
	}

	if err := h.Store.Delete(ctx, task); err != nil {
		t.Fatalf("Delete of a held task: %v", err)
	}
	got = list(t, h)["conf-hold"]
	if got == nil {
		t.Fatal("Delete removed a held task")
	}
	if !got.Deleting || !got.Held || got.UID != task.UID || got.ResourceVersion == task.ResourceVersion || got.State() != opstask.TaskStateInProgress {
		t.Fatalf("held task after Delete: Deleting %v, Held %v, UID %s (want %s), version %s (before %s), state %s; want deleting, held, a new version, InProgress",
			got.Deleting, got.Held, got.UID, task.UID, got.ResourceVersion, task.ResourceVersion, got.State())
	}
	if err := h.Store.SetHeld(ctx, task, false); !errors.Is(err, opstask.ErrConflict) {
		t.Fatalf("SetHeld(false) at the version before the delete: got %v, want ErrConflict", err)
	}
	if list(t, h)["conf-hold"] == nil {
		t.Fatal("a refused release deleted the task")
	}
	if err := h.Store.SetHeld(ctx, got, false); err != nil {
		t.Fatalf("SetHeld(false) on a deleting task: %v", err)
	}
	if gone := list(t, h)["conf-hold"]; gone != nil {
		t.Fatalf("a released task whose deletion was requested is still listed: %+v", gone)
	}
	if err := h.Store.SetHeld(ctx, got, true); !errors.Is(err, opstask.ErrNotFound) && !errors.Is(err, opstask.ErrConflict) {
		t.Fatalf("SetHeld on a deleted task: got %v, want ErrNotFound or ErrConflict", err)
	}

	// Without a hold, nothing but the hold changes.
	plain := create(t, h, h.task("conf-hold-release", 1, ""))
	if err := h.Store.SetHeld(ctx, plain, true); err != nil {
		t.Fatalf("SetHeld(true): %v", err)
	}
	if err := h.Store.SetHeld(ctx, plain, false); err != nil {
		t.Fatalf("SetHeld(false): %v", err)
	}
	if got := list(t, h)["conf-hold-release"]; got == nil || got.Held || got.Deleting || got.ResourceVersion != plain.ResourceVersion || got.State() != opstask.TaskStatePending {
		t.Fatalf("task after hold and release: %+v; want listed, not held, not deleting, at version %s, Pending", got, plain.ResourceVersion)
	}
}

// testControllerDeleteRunning deletes a task while its executor runs, with
// the next task of its target waiting. The executor takes a while to stop
// after its context is canceled; the next task must not start before it
// returned, and the deleted task must be gone.
func testControllerDeleteRunning(t *testing.T, h Harness) {
	first := create(t, h, h.task("conf-del-a", 0, "etcd-main"))
	create(t, h, h.task("conf-del-b", 0, "etcd-main"))
	const linger = 500 * time.Millisecond
	var (
		mu            sync.Mutex
		firstReturned time.Time
		cause         error
		secondStarted time.Time
	)
	running := make(chan struct{})
	exec := opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) error {
		if run.Task.Name == first.Name {
			close(running)
			<-ctx.Done()
			time.Sleep(linger) // an executor that winds down
			mu.Lock()
			cause, firstReturned = context.Cause(ctx), time.Now()
			mu.Unlock()
			return ctx.Err()
		}
		mu.Lock()
		secondStarted = time.Now()
		mu.Unlock()
		return nil
	})
	startController(t, h, opstask.Config{
		Handlers: []opstask.Handler{{Name: h.Members[0].Name, Executor: exec, AllowDuplicates: true}},
		Settle:   opstask.NoSettle,
		// Renewals would find the deletion too, but only a third of the
		// lease later: long enough that the next task would start first.
		LeaseDuration: time.Minute,
		// A Sync at least this often, whether or not the store's watch has
		// started by the time of the delete.
		ResyncPeriod: 100 * time.Millisecond,
	})
	select {
	case <-running:
	case <-time.After(60 * time.Second):
		t.Fatal("the first task did not start within 60s")
	}
	// Delete it as a user does: whatever its current version.
	deadline := time.Now().Add(60 * time.Second)
	for {
		cur := list(t, h)[first.Name]
		if cur == nil {
			t.Fatal("the running task is gone before it was deleted")
		}
		if !cur.Held {
			t.Fatalf("the running task is not held: %+v", cur)
		}
		err := h.Store.Delete(t.Context(), cur)
		if err == nil {
			break
		}
		if !errors.Is(err, opstask.ErrConflict) || time.Now().After(deadline) {
			t.Fatalf("delete the running task: %v", err)
		}
	}
	for {
		tasks := list(t, h)
		second := tasks["conf-del-b"]
		if tasks[first.Name] == nil && second != nil && second.State().Finished() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60s after the delete: first listed %v, second %+v", tasks[first.Name] != nil, second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstReturned.IsZero() || secondStarted.Before(firstReturned) {
		t.Fatalf("the next task started at %s, before the deleted task's executor returned at %s", secondStarted.Format(time.StampMicro), firstReturned.Format(time.StampMicro))
	}
	if !errors.Is(cause, opstask.ErrDeleted) && !errors.Is(cause, opstask.ErrLostClaim) {
		t.Errorf("the deleted task's executor was canceled with cause %v, want ErrDeleted (or ErrLostClaim)", cause)
	}
	t.Logf("executor canceled with cause %v; returned %s before the next task started", cause, secondStarted.Sub(firstReturned))
}

// startController runs a Controller over h.Store, configured by cfg, until
// the test ends.
func startController(t *testing.T, h Harness, cfg opstask.Config) {
	t.Helper()
	cfg.Store = h.Store
	c, err := opstask.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// testControllerApprovalGate runs an execution that plans, asks a person to
// approve the plan of its step "upload", and then runs the step "upload":
// the approval and the step share a name, and the step must wait for the
// approval, then run exactly once, with both records kept in the status.
func testControllerApprovalGate(t *testing.T, h Harness) {
	if h.Approve == nil {
		t.Skip("the harness cannot approve a task (Harness.Approve is nil)")
	}
	const plan = "upload 3 backups to the new store"
	var uploads atomic.Int32
	exec := opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) error {
		p, err := run.Step(ctx, "plan", func(context.Context) (string, string, error) { return "planned", plan, nil })
		if err != nil {
			return err
		}
		if err := run.Approval(ctx, "upload", p); err != nil {
			return err
		}
		_, err = run.Step(ctx, "upload", func(context.Context) (string, string, error) {
			uploads.Add(1)
			return "uploaded 3 backups", "3", nil
		})
		return err
	})
	task := create(t, h, h.task("conf-gate", 0, "etcd-main"))
	startController(t, h, opstask.Config{
		Handlers: []opstask.Handler{{Name: h.Members[0].Name, Executor: exec, Resumable: true}},
		Settle:   opstask.NoSettle,
		// The approval changes the task, which ends the claim at the next
		// renewal; the takeover that finds the approval comes a lease
		// after that.
		LeaseDuration: 3 * time.Second,
		ResyncPeriod:  100 * time.Millisecond,
	})
	token := opstask.ApprovalToken("upload", plan)
	waitTask(t, h, task.Name, "its approval awaited", func(task *opstask.Task) bool {
		a := task.Status.Approvals
		return len(a) == 1 && a[0].Step == "upload" && a[0].State == opstask.ApprovalStateAwaiting && a[0].Token == token
	})
	if n := uploads.Load(); n != 0 {
		t.Fatalf("upload ran %d times before the approval", n)
	}
	if err := h.Approve(t.Context(), task.Name, token); err != nil {
		t.Fatalf("approve: %v", err)
	}
	got := waitTask(t, h, task.Name, "finished", func(task *opstask.Task) bool { return task.State().Finished() })
	if got.State() != opstask.TaskStateSucceeded || uploads.Load() != 1 {
		t.Fatalf("task %s, upload ran %d times; want Succeeded and once: %+v", got.State(), uploads.Load(), got.Status)
	}
	var steps []string
	for _, s := range got.Status.Steps {
		steps = append(steps, fmt.Sprintf("%s=%s:%s", s.Name, s.State, s.Result))
	}
	if d := cmp.Diff([]string{"plan=Completed:" + plan, "upload=Completed:3"}, steps); d != "" {
		t.Errorf("steps (-want +got):\n%s", d)
	}
	if a := got.Status.Approvals; len(a) != 1 || a[0].Step != "upload" || a[0].State != opstask.ApprovalStateApproved || a[0].Token != token {
		t.Errorf("approvals %+v; want upload Approved with %s", a, token)
	}
}

// waitTask waits up to 60s for the task name to satisfy cond, and returns
// it as listed then.
func waitTask(t *testing.T, h Harness, name, what string, cond func(*opstask.Task) bool) *opstask.Task {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if task := list(t, h)[name]; task != nil && cond(task) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s not %s after 60s: %+v", name, what, list(t, h)[name])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
