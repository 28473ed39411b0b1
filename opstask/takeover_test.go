package opstask_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// resumer is a Resumable executor that records each run's spec and whether
// it was resumed; it blocks until its context is done unless release is
// closed.
type resumer struct {
	mu      sync.Mutex
	runs    []*opstask.Run
	release chan struct{}
	started chan struct{} // gets a value each time it starts
}

func (r *resumer) Execute(ctx context.Context, run *opstask.Run) error {
	r.mu.Lock()
	r.runs = append(r.runs, run)
	r.mu.Unlock()
	r.started <- struct{}{}
	select {
	case <-r.release:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (r *resumer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.runs)
}

// interrupted starts the task recover-1 of config (kind "recover" or
// "restore") and target with a controller that stops while it runs, and
// returns the task as that controller left it: InProgress, with what the
// execution started with in its status.
func interrupted(t *testing.T, kind, config, target string) *opstask.Task {
	t.Helper()
	w := newWorld(t)
	r := &resumer{release: make(chan struct{}), started: make(chan struct{}, 1)}
	c := w.controller(opstask.Config{Identity: "first", Handlers: []opstask.Handler{
		{Name: "recover", Executor: r, Resumable: true},
		{Name: "restore", Executor: r, Resumable: true},
	}})
	task, err := w.store.Create(t.Context(), &opstask.Task{Namespace: "ns", Name: "recover-1",
		Spec: opstask.Spec{Config: map[string]json.RawMessage{kind: json.RawMessage(config)}, Target: target}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-r.started
	stop() // the controller stops while the execution runs
	<-done
	task = w.get(task.Name)
	if task.State() != opstask.TaskStateInProgress || task.Status.StartedWith == nil {
		t.Fatalf("the interrupted task: %s, started with %+v; want InProgress, and what it started with", task.State(), task.Status.StartedWith)
	}
	return task
}

// A takeover resumes an execution only with the spec it started with. When
// the kind, the config or the target is not the one recorded at the start
// (a CRD without opstask's immutability rules lets a person change it, or
// remove it and add it back with other values), the execution is not
// resumed with the new spec: the task fails with code SpecChanged and a
// LastError that says what changed. So does a task whose start recorded
// nothing, since its spec cannot be shown to be the same.
func TestTakeoverRefusesAChangedSpec(t *testing.T) {
	const lease = 30 * time.Second
	started := interrupted(t, "recover", `{"fromBackup":"Full-1-20","allowDataLoss":false}`, "etcd-main")
	if sw := started.Status.StartedWith; sw.Kind != "recover" || sw.Target != "etcd-main" || !strings.HasPrefix(sw.ConfigDigest, "sha256:") {
		t.Fatalf("recorded at the start: %+v; want kind recover, target etcd-main and the config's digest", sw)
	}
	for _, tc := range []struct {
		name   string
		kind   string
		config string
		target string
		noRec  bool
		want   string // in the LastError; "" means resumed
	}{
		{"the same config, spelled otherwise: resumed", "recover", `{ "allowDataLoss": false, "fromBackup": "Full-1-20" }`, "etcd-main", false, ""},
		{"a config value changed", "recover", `{"fromBackup":"Full-1-20","allowDataLoss":true}`, "etcd-main", false, "spec.config.recover is sha256:"},
		{"a config field added", "recover", `{"fromBackup":"Full-1-20","allowDataLoss":false,"skipApproval":true}`, "etcd-main", false, "spec.config.recover is sha256:"},
		{"another kind", "restore", `{"fromBackup":"Full-1-20","allowDataLoss":false}`, "etcd-main", false, "spec.config's member is restore, was recover"},
		{"another target", "recover", `{"fromBackup":"Full-1-20","allowDataLoss":false}`, "etcd-events", false, `the target is "etcd-events", was "etcd-main"`},
		{"nothing recorded at the start", "recover", `{"fromBackup":"Full-1-20","allowDataLoss":false}`, "etcd-main", true, "status.startedWith is not recorded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			r := &resumer{release: make(chan struct{}), started: make(chan struct{}, 1)}
			close(r.release)
			c := w.controller(opstask.Config{Identity: "second", LeaseDuration: lease, Handlers: []opstask.Handler{
				{Name: "recover", Executor: r, Resumable: true},
				{Name: "restore", Executor: r, Resumable: true},
			}})
			// The task as the second controller reads it: the status
			// the first left, the spec as it is now.
			task := started.DeepCopy()
			task.Spec = opstask.Spec{Config: map[string]json.RawMessage{tc.kind: json.RawMessage(tc.config)}, Target: tc.target}
			if tc.noRec {
				task.Status.StartedWith = nil
			}
			if _, err := w.store.Create(t.Context(), task); err != nil {
				t.Fatal(err)
			}
			w.sync(t.Context(), c)
			w.clock.Step(lease)
			w.sync(t.Context(), c)
			if tc.want == "" {
				got := w.waitState("recover-1", opstask.TaskStateSucceeded)
				if r.count() != 1 || !r.runs[0].Resumed {
					t.Errorf("executor runs %d (resumed: %v); want one, resumed", r.count(), r.count() > 0 && r.runs[0].Resumed)
				}
				if len(got.Status.LastErrors) != 0 {
					t.Errorf("errors %+v", got.Status.LastErrors)
				}
				stopRun(t, c)
				return
			}
			waitFor(t, func() bool { return w.get("recover-1").State().Finished() })
			stopRun(t, c)
			got := w.get("recover-1")
			if n := r.count(); n != 0 || got.State() != opstask.TaskStateFailed {
				t.Fatalf("the executor ran %d times with the changed spec, and the task is %s; want no run and Failed", n, got.State())
			}
			le := got.Status.LastErrors[len(got.Status.LastErrors)-1]
			if le.Code != opstask.CodeSpecChanged || !strings.Contains(le.Description, tc.want) {
				t.Errorf("last error %s: %q; want %s with %q", le.Code, le.Description, opstask.CodeSpecChanged, tc.want)
			}
			if d := got.Status.LastOperation.Description; d != le.Description {
				t.Errorf("lastOperation %q; want the error", d)
			}
			t.Logf("%s: %s", le.Code, le.Description)
		})
	}
}
