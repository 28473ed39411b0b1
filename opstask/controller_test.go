package opstask_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/memstore"
)

// world is a memstore on a fake clock.
type world struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	store *memstore.Store

	mu        sync.Mutex
	confirmed map[string]time.Time // by task key: the last write a lease counted
}

func newWorld(t *testing.T) *world {
	clk := clocktesting.NewFakeClock(t0)
	return &world{t: t, clock: clk, store: memstore.New(clk), confirmed: map[string]time.Time{}}
}

func (w *world) create(name, target string, config map[string]any) *opstask.Task {
	w.t.Helper()
	spec := opstask.Spec{Config: map[string]json.RawMessage{}, Target: target}
	for k, v := range config {
		raw, err := json.Marshal(v)
		if err != nil {
			w.t.Fatal(err)
		}
		spec.Config[k] = raw
	}
	task, err := w.store.Create(w.t.Context(), &opstask.Task{Namespace: "ns", Name: name, Spec: spec})
	if err != nil {
		w.t.Fatal(err)
	}
	w.clock.Step(time.Millisecond) // distinct creation times, in creation order
	return task
}

func (w *world) get(name string) *opstask.Task {
	w.t.Helper()
	task, err := w.store.Get(w.t.Context(), "ns", name)
	if err != nil {
		w.t.Fatal(err)
	}
	return task
}

func (w *world) controller(cfg opstask.Config) *opstask.Controller {
	w.t.Helper()
	cfg.Store = w.store
	cfg.Clock = w.clock
	if cfg.Settle == 0 {
		cfg.Settle = opstask.NoSettle
	}
	c, err := opstask.New(cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	opstask.OnConfirmed(c, func(key string, at time.Time) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.confirmed[key] = at
	})
	return c
}

// sync runs a Sync once every execution of a task no longer InProgress
// has returned: its final status is written before its slot is free, and
// a Sync in between would not start what the slot is for.
func (w *world) sync(ctx context.Context, c *opstask.Controller) time.Duration {
	w.t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		tasks, err := w.store.List(ctx)
		if err != nil {
			w.t.Fatal(err)
		}
		var busy []string
		for _, task := range tasks {
			if _, ok := c.Claimed(task.Key()); ok && task.State() != opstask.TaskStateInProgress {
				busy = append(busy, task.Key())
			}
		}
		if len(busy) == 0 {
			break
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("executions of %v still run a minute after their tasks' final status", busy)
		}
	}
	d, err := c.Sync(ctx)
	if err != nil {
		w.t.Fatalf("Sync: %v", err)
	}
	return d
}

// waitState waits (in real time) until the task reaches state.
func (w *world) waitState(name string, state opstask.TaskState) *opstask.Task {
	w.t.Helper()
	deadline := time.Now().Add(time.Minute) // bounds a broken test only
	for {
		task, err := w.store.Get(w.t.Context(), "ns", name)
		if err == nil && task.State() == state {
			return task
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("task %s did not reach %s in a minute: %+v (err %v)", name, state, task, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitRenewed waits (in real time) until the task's lastOperation was
// written at the clock's current time and the lease writing it has counted
// that write: a step of the clock before then could pass the deadline of
// the write before it.
func (w *world) waitRenewed(name string) {
	w.t.Helper()
	deadline := time.Now().Add(time.Minute) // bounds a broken test only
	for {
		task := w.get(name)
		w.mu.Lock()
		counted := w.confirmed[task.Key()]
		w.mu.Unlock()
		now := w.clock.Now()
		if lo := task.Status.LastOperation; lo != nil && lo.LastUpdateTime.Time.Equal(now) && counted.Equal(now) {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("task %s not renewed at %v in a minute: %+v (last write counted at %v)", name, now, task.Status.LastOperation, counted)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitStarted waits (in real time) until g started the task: the
// execution's timers exist from then on.
func (w *world) waitStarted(g *gate, name string) {
	w.t.Helper()
	deadline := time.Now().Add(time.Minute) // bounds a broken test only
	for !slices.Contains(g.startedList(), name) {
		if time.Now().After(deadline) {
			w.t.Fatalf("task %s not started in a minute", name)
		}
		time.Sleep(time.Millisecond)
	}
}

// gate is an executor that blocks each run until released.
type gate struct {
	mu      sync.Mutex
	started []string
	resumed []string
	release map[string]chan error
}

func newGate() *gate { return &gate{release: map[string]chan error{}} }

func (g *gate) ch(name string) chan error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.release[name] == nil {
		g.release[name] = make(chan error, 1)
	}
	return g.release[name]
}

func (g *gate) Execute(ctx context.Context, run *opstask.Run) error {
	g.mu.Lock()
	g.started = append(g.started, run.Task.Name)
	if run.Resumed {
		g.resumed = append(g.resumed, run.Task.Name)
	}
	g.mu.Unlock()
	select {
	case err := <-g.ch(run.Task.Name):
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (g *gate) startedList() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.started...)
}

func lastError(task *opstask.Task) opstask.LastError {
	if len(task.Status.LastErrors) == 0 {
		return opstask.LastError{}
	}
	return task.Status.LastErrors[len(task.Status.LastErrors)-1]
}

func TestAdmission(t *testing.T) {
	w := newWorld(t)
	g := newGate()
	quorum := opstask.PreconditionFunc(func(ctx context.Context, task *opstask.Task) error {
		return opstask.Unmet("NoQuorum", "etcd-main has no quorum")
	})
	c := w.controller(opstask.Config{Handlers: []opstask.Handler{
		{Name: "snapshot", Executor: g, DuplicateKey: func(t *opstask.Task) (string, error) {
			var cfg struct{ Type string }
			_, raw, _ := t.Spec.Member()
			err := json.Unmarshal(raw, &cfg)
			return cfg.Type, err
		}},
		{Name: "recover", Executor: g, Preconditions: []opstask.Precondition{quorum}},
	}})
	w.create("t1-full", "etcd-main", map[string]any{"snapshot": map[string]string{"type": "full"}})
	w.create("t2-full-again", "etcd-main", map[string]any{"snapshot": map[string]string{"type": "full", "note": "other config, same key"}})
	w.create("t3-delta", "etcd-main", map[string]any{"snapshot": map[string]string{"type": "delta"}})
	w.create("t4-recover", "etcd-main", map[string]any{"recover": map[string]any{}})
	w.create("t5-unknown", "etcd-main", map[string]any{"defrag": map[string]any{}})
	w.create("t6-two", "etcd-main", map[string]any{"snapshot": map[string]string{"type": "full"}, "recover": map[string]any{}})
	w.create("t7-none", "etcd-main", nil)

	ctx := t.Context()
	w.sync(ctx, c)
	if got := w.get("t1-full").State(); got != opstask.TaskStateInProgress {
		t.Fatalf("head t1-full is %s, want InProgress", got)
	}
	for name, code := range map[string]opstask.ErrorCode{
		"t2-full-again": opstask.CodeDuplicate,
		"t5-unknown":    opstask.CodeInvalidSpec,
		"t6-two":        opstask.CodeInvalidSpec,
		"t7-none":       opstask.CodeInvalidSpec,
	} {
		task := w.get(name)
		lo := task.Status.LastOperation
		if task.State() != opstask.TaskStateRejected || lastError(task).Code != code || lo == nil || lo.Type != opstask.LastOperationTypeAdmit || lo.State != opstask.LastOperationStateFailed {
			t.Errorf("%s: %s, lastOperation %+v, lastErrors %+v; want Rejected with %s", name, task.State(), lo, task.Status.LastErrors, code)
		}
	}
	if d := lastError(w.get("t6-two")).Description; !strings.Contains(d, "recover, snapshot") {
		t.Errorf("two-member rejection does not name them: %q", d)
	}
	for _, name := range []string{"t3-delta", "t4-recover"} {
		if got := w.get(name).State(); got != opstask.TaskStatePending {
			t.Errorf("%s is %s while t1 runs, want Pending", name, got)
		}
	}

	g.ch("t1-full") <- nil
	w.waitState("t1-full", opstask.TaskStateSucceeded)
	w.sync(ctx, c)
	w.waitState("t3-delta", opstask.TaskStateInProgress)
	g.ch("t3-delta") <- errors.New("backup sidecar unreachable")
	failed := w.waitState("t3-delta", opstask.TaskStateFailed)
	if e := lastError(failed); e.Code != opstask.CodeExecutionFailed || e.Description != "backup sidecar unreachable" {
		t.Errorf("t3-delta failure recorded as %+v", e)
	}
	w.sync(ctx, c)
	rejected := w.waitState("t4-recover", opstask.TaskStateRejected)
	if e := lastError(rejected); e.Code != "NoQuorum" || !strings.Contains(e.Description, "etcd-main has no quorum") {
		t.Errorf("precondition rejection recorded as %+v", e)
	}
	if got := g.startedList(); strings.Join(got, ",") != "t1-full,t3-delta" {
		t.Errorf("executed %v, want t1-full,t3-delta", got)
	}
}

func TestTimeoutFailsTheTask(t *testing.T) {
	w := newWorld(t)
	g := newGate()
	c := w.controller(opstask.Config{LeaseDuration: time.Minute, Handlers: []opstask.Handler{{Name: "snapshot", Executor: g,
		Timeout: func(*opstask.Task) (time.Duration, error) { return 8 * time.Minute, nil }}}})
	w.create("slow", "etcd-main", map[string]any{"snapshot": map[string]any{}})
	w.sync(t.Context(), c)
	w.waitState("slow", opstask.TaskStateInProgress)
	w.waitStarted(g, "slow") // its timers are set
	// Renewals (every 20s) keep the lease while the executor runs. Each
	// step waits for its renewal: a claim not confirmed for 2/3 of the lease
	// is given up.
	for range 7 * 3 {
		w.clock.Step(20 * time.Second)
		w.waitRenewed("slow")
	}
	if got := w.get("slow").State(); got != opstask.TaskStateInProgress {
		t.Fatalf("after 7 of 8 minutes: %s, want InProgress", got)
	}
	w.clock.Step(20 * time.Second)
	w.waitRenewed("slow")
	w.clock.Step(20 * time.Second)
	w.waitRenewed("slow")
	w.clock.Step(20 * time.Second) // 8 minutes
	failed := w.waitState("slow", opstask.TaskStateFailed)
	if e := lastError(failed); e.Code != opstask.CodeTimeout {
		t.Errorf("timeout recorded as %+v, want code Timeout", e)
	}
}

func TestInterruptedExecution(t *testing.T) {
	for _, resumable := range []bool{true, false} {
		name := "kind cannot resume: task fails"
		if resumable {
			name = "kind resumes: task runs again and succeeds"
		}
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			g := newGate()
			kinds := []opstask.Handler{{Name: "copy", Executor: g, Resumable: resumable}}
			lease := 30 * time.Second
			first := w.controller(opstask.Config{Identity: "first", Handlers: kinds, LeaseDuration: lease})
			w.create("copy-1", "", map[string]any{"copy": map[string]any{}})
			w.create("copy-2", "", map[string]any{"copy": map[string]any{"n": 2}})

			ctx, stop := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- first.Run(ctx) }()
			w.waitState("copy-1", opstask.TaskStateInProgress)
			stop() // the first controller dies mid-execution
			<-done
			if got := w.get("copy-1"); got.State() != opstask.TaskStateInProgress || !strings.HasPrefix(got.Status.LastOperation.RunID, "first-") {
				t.Fatalf("after the first controller stopped: %s by %s, want InProgress by first-*", got.State(), got.Status.LastOperation.RunID)
			}

			second := w.controller(opstask.Config{Identity: "second", Handlers: kinds, LeaseDuration: lease})
			if d := w.sync(t.Context(), second); d != lease {
				t.Errorf("second controller requeues after %s, want the lease %s", d, lease)
			}
			w.clock.Step(lease - time.Second)
			w.sync(t.Context(), second)
			if got := w.get("copy-1").Status.LastOperation.RunID; !strings.HasPrefix(got, "first-") {
				t.Fatalf("taken over before the lease ran out, by %s", got)
			}
			if got := w.get("copy-2").State(); got != opstask.TaskStatePending {
				t.Fatalf("copy-2 is %s while copy-1 is InProgress", got)
			}
			w.clock.Step(time.Second)
			w.sync(t.Context(), second)
			if !resumable {
				failed := w.waitState("copy-1", opstask.TaskStateFailed)
				if e := lastError(failed); e.Code != opstask.CodeInterrupted {
					t.Errorf("interruption recorded as %+v", e)
				}
			} else {
				w.waitState("copy-1", opstask.TaskStateInProgress)
				deadline := time.Now().Add(5 * time.Second)
				for len(g.startedList()) < 2 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				g.mu.Lock()
				resumed := append([]string(nil), g.resumed...)
				g.mu.Unlock()
				if strings.Join(resumed, ",") != "copy-1" {
					t.Fatalf("resumed %v, want copy-1", resumed)
				}
				g.ch("copy-1") <- nil
				w.waitState("copy-1", opstask.TaskStateSucceeded)
			}
			w.sync(t.Context(), second)
			w.waitState("copy-2", opstask.TaskStateInProgress)
			g.ch("copy-2") <- nil
			w.waitState("copy-2", opstask.TaskStateSucceeded)
			ctx2, stop2 := context.WithCancel(t.Context())
			stop2()
			_ = second.Run(ctx2) // waits for its executions
			_ = ctx2
		})
	}
}

func TestCleanupAfterTTL(t *testing.T) {
	w := newWorld(t)
	var cleaned atomic.Int32
	var sawCleanup atomic.Bool
	c := w.controller(opstask.Config{DefaultTTL: time.Hour, Handlers: []opstask.Handler{
		{Name: "job", Executor: opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) error { return nil }),
			Cleanup: func(ctx context.Context, task *opstask.Task) error {
				cur, err := w.store.Get(ctx, task.Namespace, task.Name)
				if err == nil && cur.Status.LastOperation.Type == opstask.LastOperationTypeCleanup && cur.Status.LastOperation.State == opstask.LastOperationStateInProgress {
					sawCleanup.Store(true)
				}
				cleaned.Add(1)
				return nil
			}},
	}})
	task := w.create("job-1", "a", map[string]any{"job": map[string]any{}})
	_ = task
	w.sync(t.Context(), c)
	finished := w.waitState("job-1", opstask.TaskStateSucceeded)
	// The TTL counts from the end of the second the task finished in.
	end := finished.Status.LastTransitionTime.Time.Truncate(time.Second).Add(time.Second)
	if d := w.sync(t.Context(), c); d != end.Add(time.Hour).Sub(w.clock.Now()) {
		t.Errorf("requeue after %s, want exactly the TTL's end in %s", d, end.Add(time.Hour).Sub(w.clock.Now()))
	}
	w.clock.SetTime(end.Add(time.Hour - time.Nanosecond))
	if d := w.sync(t.Context(), c); d != time.Nanosecond {
		t.Errorf("1ns before expiry: requeue after %s, want 1ns", d)
	}
	if _, err := w.store.Get(t.Context(), "ns", "job-1"); err != nil {
		t.Fatalf("deleted before its TTL: %v", err)
	}
	w.clock.Step(time.Nanosecond)
	w.sync(t.Context(), c)
	if _, err := w.store.Get(t.Context(), "ns", "job-1"); !errors.Is(err, opstask.ErrNotFound) {
		t.Fatalf("not deleted at its TTL: %v", err)
	}
	if cleaned.Load() != 1 || !sawCleanup.Load() {
		t.Errorf("cleanup ran %d times, Cleanup recorded first: %v; want once, true", cleaned.Load(), sawCleanup.Load())
	}
}

func TestConcurrencyLimitAndMetrics(t *testing.T) {
	w := newWorld(t)
	g := newGate()
	reg := prometheus.NewRegistry()
	m, err := opstask.NewMetrics(opstask.MetricsConfig{Registerer: reg, Prefix: "etcddruid_", TargetLabel: "etcd", NamespaceLabel: "etcd_namespace"})
	if err != nil {
		t.Fatal(err)
	}
	c := w.controller(opstask.Config{MaxConcurrent: 2, Metrics: m, Handlers: []opstask.Handler{{Name: "snap", Executor: g, AllowDuplicates: true}}})
	for _, n := range []string{"a", "b", "c"} {
		w.create("task-"+n, "etcd-"+n, map[string]any{"snap": map[string]any{}})
	}
	w.sync(t.Context(), c)
	time.Sleep(20 * time.Millisecond)
	inProgress := 0
	for _, n := range []string{"a", "b", "c"} {
		if w.get("task-"+n).State() == opstask.TaskStateInProgress {
			inProgress++
		}
	}
	if inProgress != 2 {
		t.Fatalf("%d tasks in progress with MaxConcurrent 2", inProgress)
	}
	w.clock.Step(3 * time.Second)
	g.ch("task-a") <- nil
	w.waitState("task-a", opstask.TaskStateSucceeded)
	// task-a's slot is free once its execution returned, which may be
	// after its final status is written: w.sync waits for it (a loaded CI
	// run once started nothing here).
	w.sync(t.Context(), c)
	w.waitState("task-c", opstask.TaskStateInProgress)
	want := `# HELP etcddruid_operator_tasks_total Tasks that reached a final state, by type, final state and target.
# TYPE etcddruid_operator_tasks_total counter
etcddruid_operator_tasks_total{etcd="etcd-a",etcd_namespace="ns",state="Succeeded",type="snap"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "etcddruid_operator_tasks_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "etcddruid_operator_task_duration_seconds"); n != 1 {
		t.Errorf("%d duration series, want 1", n)
	}
	g.ch("task-b") <- nil
	g.ch("task-c") <- nil
	w.waitState("task-b", opstask.TaskStateSucceeded)
	w.waitState("task-c", opstask.TaskStateSucceeded)
}

func TestNewRejectsBadConfig(t *testing.T) {
	s := memstore.New(nil)
	ok := opstask.Handler{Name: "a", Executor: opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })}
	for name, cfg := range map[string]opstask.Config{
		"Store":             {Handlers: []opstask.Handler{ok}},
		"Handlers is empty": {Store: s},
		"Executor":          {Store: s, Handlers: []opstask.Handler{{Name: "a"}}},
		"twice":             {Store: s, Handlers: []opstask.Handler{ok, ok}},
		"LeaseDuration":     {Store: s, Handlers: []opstask.Handler{ok}, LeaseDuration: -time.Second},
		"MaxConcurrent":     {Store: s, Handlers: []opstask.Handler{ok}, MaxConcurrent: -1},
	} {
		_, err := opstask.New(cfg)
		if !errors.Is(err, opstask.ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want ErrInvalidConfig naming %q", name, err, name)
		}
	}
}

// A succeeded task says what its executor did: the last progress report,
// else "execution completed".
func TestSucceededKeepsLastProgress(t *testing.T) {
	w := newWorld(t)
	report := opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) error {
		if run.Task.Name == "silent" {
			return nil
		}
		if err := run.Progress(ctx, "uploading"); err != nil {
			return err
		}
		return run.Progress(ctx, "uploaded Full-00000000-00000042")
	})
	c := w.controller(opstask.Config{Handlers: []opstask.Handler{{Name: "snapshot", Executor: report}}})
	w.create("reports", "etcd-a", map[string]any{"snapshot": map[string]any{}})
	w.create("silent", "etcd-b", map[string]any{"snapshot": map[string]any{}})
	w.sync(t.Context(), c)
	for name, want := range map[string]string{"reports": "uploaded Full-00000000-00000042", "silent": "execution completed"} {
		lo := w.waitState(name, opstask.TaskStateSucceeded).Status.LastOperation
		if lo == nil || lo.Type != opstask.LastOperationTypeExecution || lo.State != opstask.LastOperationStateCompleted || lo.Description != want {
			t.Errorf("%s: lastOperation %+v, want Execution Completed %q", name, lo, want)
		}
	}
}

// A precondition that cannot use the task's spec rejects it (InvalidSpec)
// instead of blocking its queue with retries.
func TestPreconditionInvalidSpecRejects(t *testing.T) {
	w := newWorld(t)
	decode := opstask.PreconditionFunc(func(ctx context.Context, task *opstask.Task) error {
		var cfg struct{ Ops []string }
		_, raw, _ := task.Spec.Member()
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return fmt.Errorf("%w: spec.config.maintenance: %v", opstask.ErrInvalidSpec, err)
		}
		return nil
	})
	g := newGate()
	c := w.controller(opstask.Config{Handlers: []opstask.Handler{{Name: "maintenance", Executor: g, Preconditions: []opstask.Precondition{decode}}}})
	w.create("bad", "etcd-main", map[string]any{"maintenance": map[string]any{"ops": "compact"}})
	w.create("good", "etcd-main", map[string]any{"maintenance": map[string]any{"ops": []string{"compact"}}})
	w.sync(t.Context(), c)
	bad := w.get("bad")
	if bad.State() != opstask.TaskStateRejected || lastError(bad).Code != opstask.CodeInvalidSpec || !strings.Contains(lastError(bad).Description, "spec.config.maintenance") {
		t.Errorf("bad: %s, lastErrors %+v; want Rejected with InvalidSpec naming the field", bad.State(), bad.Status.LastErrors)
	}
	w.waitState("good", opstask.TaskStateInProgress)
	g.ch("good") <- nil
	w.waitState("good", opstask.TaskStateSucceeded)
}

// A controller that does not have a task's kind cannot run its Cleanup, so
// it never deletes an executed task of that kind: it leaves it, past its
// TTL, for a controller that has the kind, and says so in a metric. A
// rejected task never ran, so there is nothing to clean up and any
// controller deletes it after its TTL.
func TestExpiredTaskOfAnUnregisteredKind(t *testing.T) {
	w := newWorld(t)
	var cleaned atomic.Int32
	nop := opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })
	full := w.controller(opstask.Config{Identity: "full", DefaultTTL: time.Hour, Handlers: []opstask.Handler{
		{Name: "snapshot", Executor: nop},
		{Name: "copy", Executor: nop, Cleanup: func(context.Context, *opstask.Task) error { cleaned.Add(1); return nil }},
	}})
	reg := prometheus.NewRegistry()
	m, err := opstask.NewMetrics(opstask.MetricsConfig{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	partial := w.controller(opstask.Config{Identity: "partial", DefaultTTL: time.Hour, Metrics: m, Handlers: []opstask.Handler{
		{Name: "snapshot", Executor: nop},
	}})
	w.create("copy-1", "", map[string]any{"copy": map[string]any{}})
	w.sync(t.Context(), full)
	w.waitState("copy-1", opstask.TaskStateSucceeded)
	w.create("copy-2", "", map[string]any{"copy": map[string]any{}})
	w.sync(t.Context(), partial) // rejects copy-2: no such kind here
	w.waitState("copy-2", opstask.TaskStateRejected)
	w.clock.Step(2 * time.Hour)

	t.Run("controller without the kind leaves an executed task past its TTL alone", func(t *testing.T) {
		dry, err := partial.DryRun(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var would []string
		for _, e := range dry {
			would = append(would, e.Task.Name)
		}
		if strings.Join(would, ",") != "copy-2" {
			t.Errorf("dry run of the controller without the kind would delete %v, want [copy-2]", would)
		}
		if d := w.sync(t.Context(), partial); d != 0 {
			t.Errorf("Sync wants to look again in %s for a task it leaves alone", d)
		}
		if _, err := w.store.Get(t.Context(), "ns", "copy-1"); err != nil {
			t.Fatalf("the controller without the kind deleted copy-1 without its Cleanup: %v", err)
		}
		if _, err := w.store.Get(t.Context(), "ns", "copy-2"); !errors.Is(err, opstask.ErrNotFound) {
			t.Errorf("rejected copy-2 not deleted after its TTL: %v", err)
		}
		want := `# HELP operator_expired_tasks_without_kind Finished tasks past their TTL that this controller leaves alone, neither cleaned up nor deleted, because their kind is not registered here.
# TYPE operator_expired_tasks_without_kind gauge
operator_expired_tasks_without_kind{type="copy"} 1
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "operator_expired_tasks_without_kind"); err != nil {
			t.Error(err)
		}
	})
	t.Run("controller with the kind cleans it up and deletes it", func(t *testing.T) {
		w.sync(t.Context(), full)
		if _, err := w.store.Get(t.Context(), "ns", "copy-1"); !errors.Is(err, opstask.ErrNotFound) || cleaned.Load() != 1 {
			t.Errorf("after the controller with the kind: get %v, cleanups %d; want not found, 1", err, cleaned.Load())
		}
		w.sync(t.Context(), partial)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(""), "operator_expired_tasks_without_kind"); err != nil {
			t.Error(err)
		}
	})
}

// Kubernetes stores lastTransitionTime truncated to the second: a task
// stamped 10:00:00 may have finished at 10:00:00.9. Its TTL counts from the
// end of that second, so that it never expires early.
func TestTTLNeverEarlyForATruncatedFinishTime(t *testing.T) {
	w := newWorld(t)
	nop := opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })
	c := w.controller(opstask.Config{Handlers: []opstask.Handler{{Name: "job", Executor: nop}}})
	finished := t0.Add(time.Hour) // a whole second, as the API server returns it
	createSucceeded(t, w, "done", finished, 60)
	for _, step := range []struct {
		name    string
		at      time.Duration // after the stamped finish
		kept    bool
		requeue time.Duration
	}{
		{"TTL after the stamped second, 0.9s early for a finish at .9: kept", 60 * time.Second, true, time.Second},
		{"1ns before the end of the finish second plus TTL: kept", 61*time.Second - time.Nanosecond, true, time.Nanosecond},
		{"end of the finish second plus TTL: deleted", 61 * time.Second, false, 0},
	} {
		w.clock.SetTime(finished.Add(step.at))
		dry, err := c.DryRun(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if d := w.sync(t.Context(), c); d != step.requeue {
			t.Errorf("%s: requeue after %s, want %s", step.name, d, step.requeue)
		}
		_, err = w.store.Get(t.Context(), "ns", "done")
		if kept := err == nil; kept != step.kept {
			t.Fatalf("%s: task kept = %v (%v)", step.name, kept, err)
		}
		if len(dry) == 0 == !step.kept {
			t.Errorf("%s: dry run listed %d tasks", step.name, len(dry))
		}
	}
}

// Config says negative durations are refused, naming the field and the
// value; a negative Settle other than NoSettle was accepted and meant "no
// wait". NoSettle (-1ns, what callers wrote as Settle: -1) is still
// accepted.
func TestNegativeSettleIsRefused(t *testing.T) {
	ok := opstask.Handler{Name: "a", Executor: opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })}
	_, err := opstask.New(opstask.Config{Store: memstore.New(nil), Handlers: []opstask.Handler{ok}, Settle: -2 * time.Second})
	if !errors.Is(err, opstask.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.Settle = -2s") {
		t.Fatalf("New with Settle -2s = %v, want ErrInvalidConfig naming Config.Settle = -2s", err)
	}
	if _, err := opstask.New(opstask.Config{Store: memstore.New(nil), Handlers: []opstask.Handler{ok}, Settle: opstask.NoSettle}); err != nil {
		t.Fatalf("New with NoSettle = %v", err)
	}
	_, err = opstask.New(opstask.Config{Store: memstore.New(nil), Handlers: []opstask.Handler{ok}, ClockSkewTolerance: -time.Second})
	if !errors.Is(err, opstask.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.ClockSkewTolerance = -1s") {
		t.Fatalf("New with ClockSkewTolerance -1s = %v, want ErrInvalidConfig naming it", err)
	}
}

// createSucceeded stores task name of kind job, Succeeded at finished, with
// a TTL of ttl seconds.
func createSucceeded(t *testing.T, w *world, name string, finished time.Time, ttl int32) {
	t.Helper()
	status := opstask.Status{State: opstask.TaskStateSucceeded, StartedAt: metaTime(finished), LastTransitionTime: metaTime(finished),
		LastOperation: &opstask.LastOperation{Type: opstask.LastOperationTypeExecution, State: opstask.LastOperationStateCompleted, RunID: "run-1"}}
	if _, err := w.store.Create(t.Context(), &opstask.Task{Namespace: "ns", Name: name, Status: status,
		Spec: opstask.Spec{Config: map[string]json.RawMessage{"job": json.RawMessage(`{}`)}, TTLSecondsAfterFinished: &ttl}}); err != nil {
		t.Fatal(err)
	}
}

// A controller whose clock runs ahead of the finishing controller's by d
// judged the TTL d early. With Config.ClockSkewTolerance the task is kept
// that much longer, and Sync and DryRun agree on the instant.
func TestTTLWaitsForTheClockSkewTolerance(t *testing.T) {
	w := newWorld(t)
	nop := opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })
	c := w.controller(opstask.Config{ClockSkewTolerance: 10 * time.Second, Handlers: []opstask.Handler{{Name: "job", Executor: nop}}})
	finished := t0.Add(time.Hour)
	createSucceeded(t, w, "done", finished, 60)
	for _, step := range []struct {
		name    string
		at      time.Duration // after the stamped finish
		kept    bool
		requeue time.Duration
	}{
		{"end of the finish second plus TTL: kept for the tolerance", 61 * time.Second, true, 10 * time.Second},
		{"1ns before the tolerance runs out: kept", 71*time.Second - time.Nanosecond, true, time.Nanosecond},
		{"TTL plus tolerance: deleted", 71 * time.Second, false, 0},
	} {
		w.clock.SetTime(finished.Add(step.at))
		dry, err := c.DryRun(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !step.kept && (len(dry) != 1 || !dry[0].At.Equal(finished.Add(71*time.Second))) {
			t.Errorf("%s: dry run %+v, want the task expiring at finish + 71s", step.name, dry)
		}
		if d := w.sync(t.Context(), c); d != step.requeue {
			t.Errorf("%s: requeue after %s, want %s", step.name, d, step.requeue)
		}
		_, err = w.store.Get(t.Context(), "ns", "done")
		if kept := err == nil; kept != step.kept {
			t.Fatalf("%s: task kept = %v (%v)", step.name, kept, err)
		}
		if step.kept && len(dry) != 0 {
			t.Errorf("%s: dry run listed %d tasks", step.name, len(dry))
		}
	}
}

// The per-target series of the task metrics were never deleted: every
// target ever seen kept its series for the life of the process. Now a
// target's series go once it has no task left.
func TestMetricSeriesOfATargetWithoutTasksAreDeleted(t *testing.T) {
	w := newWorld(t)
	reg := prometheus.NewRegistry()
	m, err := opstask.NewMetrics(opstask.MetricsConfig{Registerer: reg, TargetLabel: "etcd", NamespaceLabel: "etcd_namespace"})
	if err != nil {
		t.Fatal(err)
	}
	nop := opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })
	c := w.controller(opstask.Config{DefaultTTL: time.Hour, Metrics: m, Handlers: []opstask.Handler{{Name: "job", Executor: nop}}})
	w.create("short", "etcd-a", map[string]any{"job": map[string]any{}})
	w.sync(t.Context(), c)
	w.waitState("short", opstask.TaskStateSucceeded)
	w.clock.Step(30 * time.Minute)
	w.create("later", "etcd-b", map[string]any{"job": map[string]any{}})
	w.sync(t.Context(), c)
	w.waitState("later", opstask.TaskStateSucceeded)
	series := func() int {
		return testutil.CollectAndCount(reg, "operator_tasks_total", "operator_task_duration_seconds")
	}
	if n := series(); n != 4 {
		t.Fatalf("%d series, want 4 (two metrics, two targets)", n)
	}
	// etcd-a's task runs out of TTL and is deleted; the next Sync finds the
	// target without tasks.
	w.clock.Step(31 * time.Minute)
	w.sync(t.Context(), c)
	if _, err := w.store.Get(t.Context(), "ns", "short"); !errors.Is(err, opstask.ErrNotFound) {
		t.Fatalf("short not deleted after its TTL: %v", err)
	}
	w.sync(t.Context(), c)
	// Its last count stays for ForgetAfter (15 minutes by default), to be
	// scraped; then the next Sync deletes its series.
	if n := series(); n != 4 {
		t.Fatalf("%d series right after etcd-a lost its last task, want 4: its last counts must be scraped first", n)
	}
	w.clock.Step(opstask.DefaultForgetAfter)
	w.sync(t.Context(), c)
	want := `# HELP operator_tasks_total Tasks that reached a final state, by type, final state and target.
# TYPE operator_tasks_total counter
operator_tasks_total{etcd="etcd-b",etcd_namespace="ns",state="Succeeded",type="job"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "operator_tasks_total"); err != nil {
		t.Error(err)
	}
	if n := series(); n != 2 {
		t.Fatalf("%d series after etcd-a lost its last task, want 2 (etcd-b's)", n)
	}
}

// NewMetrics refuses what would panic or fail later without naming the
// field: buckets out of order (the histogram panicked at the first finished
// task) and target labels that repeat another label.
func TestNewMetricsRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  opstask.MetricsConfig
		want string
	}{
		{opstask.MetricsConfig{Buckets: []float64{2, 1}}, "MetricsConfig.Buckets = [2 1]"},
		{opstask.MetricsConfig{ForgetAfter: -time.Second}, "MetricsConfig.ForgetAfter = -1s"},
		{opstask.MetricsConfig{TargetLabel: "state"}, `MetricsConfig.TargetLabel = "state"`},
		{opstask.MetricsConfig{TargetLabel: "etcd", NamespaceLabel: "etcd"}, `MetricsConfig.TargetLabel = "etcd"`},
	} {
		tc.cfg.Registerer = prometheus.NewRegistry()
		_, err := opstask.NewMetrics(tc.cfg)
		if !errors.Is(err, opstask.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewMetrics(%+v) = %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.want)
		}
	}
}

// Two controllers in one process create their metrics on one registry (one
// per task resource, on the manager's registry): the second NewMetrics
// shares the first's collectors instead of failing, and a controller that
// forgets a target deletes only the series it recorded, not the other's
// series of a target of the same name.
func TestTwoControllersShareMetricsOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	nop := opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })
	worlds := []*world{newWorld(t), newWorld(t)}
	var ctls []*opstask.Controller
	for i, w := range worlds {
		m, err := opstask.NewMetrics(opstask.MetricsConfig{Registerer: reg})
		if err != nil {
			t.Fatalf("NewMetrics of controller %d on a shared registry: %v", i, err)
		}
		ctls = append(ctls, w.controller(opstask.Config{DefaultTTL: time.Hour, Metrics: m,
			Handlers: []opstask.Handler{{Name: []string{"snapshot", "copy"}[i], Executor: nop}}}))
		w.create("task", "etcd-a", map[string]any{[]string{"snapshot", "copy"}[i]: map[string]any{}})
		w.sync(t.Context(), ctls[i])
		w.waitState("task", opstask.TaskStateSucceeded)
	}
	if n := testutil.CollectAndCount(reg, "operator_tasks_total"); n != 2 {
		t.Fatalf("%d series of operator_tasks_total, want 2 (one per controller)", n)
	}
	// The first controller's task runs out of TTL; once its target has been
	// without tasks for ForgetAfter, it forgets its series.
	w := worlds[0]
	w.clock.Step(61 * time.Minute)
	w.sync(t.Context(), ctls[0])
	w.sync(t.Context(), ctls[0])
	w.clock.Step(opstask.DefaultForgetAfter)
	w.sync(t.Context(), ctls[0])
	want := `# HELP operator_tasks_total Tasks that reached a final state, by type, final state and target.
# TYPE operator_tasks_total counter
operator_tasks_total{state="Succeeded",target="etcd-a",target_namespace="ns",type="copy"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "operator_tasks_total"); err != nil {
		t.Errorf("after the first controller forgot etcd-a: %v", err)
	}
}

// finishWatch is a store that records, at each write of a finished state,
// how many executions its controller counts as running.
type finishWatch struct {
	*memstore.Store
	c       atomic.Pointer[opstask.Controller]
	mu      sync.Mutex
	running []int
}

func (s *finishWatch) UpdateStatus(ctx context.Context, t *opstask.Task) error {
	if t.State().Finished() {
		s.mu.Lock()
		s.running = append(s.running, s.c.Load().Running())
		s.mu.Unlock()
	}
	return s.Store.UpdateStatus(ctx, t)
}

// Running counts an execution from its claim until its final status write
// is made and its slot is free: a caller that sees the task finished in the
// store still sees it running until then, and the next task of the target
// starts at the Sync after that.
func TestRunningCountsUntilTheSlotIsFree(t *testing.T) {
	w := newWorld(t)
	store := &finishWatch{Store: w.store}
	release := make(chan struct{})
	c, err := opstask.New(opstask.Config{Store: store, Clock: w.clock, Settle: opstask.NoSettle, Handlers: []opstask.Handler{{
		Name: "snap", AllowDuplicates: true,
		Executor: opstask.ExecutorFunc(func(ctx context.Context, _ *opstask.Run) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	store.c.Store(c)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	if n := c.Running(); n != 0 {
		t.Fatalf("Running() = %d before any task, want 0", n)
	}
	w.create("a", "x", map[string]any{"snap": map[string]any{}})
	w.create("b", "x", map[string]any{"snap": map[string]any{}})
	for _, name := range []string{"a", "b"} {
		w.sync(ctx, c)
		w.waitState(name, opstask.TaskStateInProgress)
		if n := c.Running(); n != 1 {
			t.Fatalf("Running() = %d while %s executes, want 1", n, name)
		}
		release <- struct{}{}
		w.waitState(name, opstask.TaskStateSucceeded)
		deadline := time.Now().Add(time.Minute)
		for c.Running() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("Running() = %d a minute after %s finished, want 0", c.Running(), name)
			}
			time.Sleep(time.Millisecond)
		}
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if !slices.Equal(store.running, []int{1, 1}) {
		t.Errorf("Running() at the final writes = %v, want [1 1]: an execution counts until its final status is written", store.running)
	}
}

// TestClaimedReportsTheWritesTheLeaseCounted: Claimed is what a test on a
// fake clock waits for before it steps past a renewal.
func TestClaimedReportsTheWritesTheLeaseCounted(t *testing.T) {
	w := newWorld(t)
	g := newGate()
	c := w.controller(opstask.Config{Handlers: []opstask.Handler{{Name: "job", Executor: g}}})
	if _, ok := c.Claimed("ns/t1"); ok {
		t.Fatal("Claimed reports a claim before any task exists")
	}
	w.create("t1", "x", map[string]any{"job": map[string]any{}})
	w.sync(t.Context(), c)
	w.waitStarted(g, "t1")
	claimed := w.get("t1").Status.LastOperation.LastUpdateTime.Time
	if at, ok := c.Claimed("ns/t1"); !ok || !at.Equal(claimed) {
		t.Fatalf("Claimed = %v, %v while the execution runs; want the claim's write, %v", at, ok, claimed)
	}
	w.clock.Step(opstask.DefaultLeaseDuration / 3)
	w.waitRenewed("t1")
	if at, ok := c.Claimed("ns/t1"); !ok || !at.Equal(w.clock.Now()) {
		t.Fatalf("Claimed = %v, %v after the renewal; want %v", at, ok, w.clock.Now())
	}
	g.ch("t1") <- nil
	w.waitState("t1", opstask.TaskStateSucceeded)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		if _, ok := c.Claimed("ns/t1"); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Claimed still reports a claim a minute after the execution ended")
		}
	}
}
