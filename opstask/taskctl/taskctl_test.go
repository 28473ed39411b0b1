package taskctl_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
	"github.com/groundskeeper-io/groundskeeper/opstask/taskctl"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func setup(t *testing.T) (taskctl.Tasks, dynamic.ResourceInterface) {
	t.Helper()
	env := testenv.StartKubernetes(t)
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := opstasktest.InstallCRD(context.Background(), dyn); err != nil {
		t.Fatal(err)
	}
	c := dyn.Resource(opstasktest.Resource).Namespace(env.Namespace)
	return taskctl.Tasks{Client: c, Resource: "testtask", TargetField: opstasktest.TargetField}, c
}

func create(t *testing.T, c dynamic.ResourceInterface, name, kind, target string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": opstasktest.Resource.GroupVersion().String(), "kind": "TestTask",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"config": map[string]any{kind: map[string]any{}}, opstasktest.TargetField: target},
	}}
	u, err := c.Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// setStatus writes the task's status as a controller would.
func setStatus(t *testing.T, c dynamic.ResourceInterface, name string, st opstask.Status) {
	t.Helper()
	u, err := c.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := toMap(&st)
	if err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = obj
	if _, err := c.UpdateStatus(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe to read while Wait writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestWaitPrintsEachChangeUntilTheTaskFinishes(t *testing.T) {
	tasks, c := setup(t)
	create(t, c, "snap", "snapshot", "main")
	var out syncBuffer
	type result struct {
		state opstask.TaskState
		err   error
	}
	done := make(chan result, 1)
	go func() {
		s, err := tasks.Wait(context.Background(), "snap", &out)
		done <- result{s, err}
	}()
	waitFor(t, func() bool { return strings.Contains(out.String(), "Pending") })
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	setStatus(t, c, "snap", opstask.Status{State: opstask.TaskStateInProgress,
		LastOperation: &opstask.LastOperation{Type: opstask.LastOperationTypeExecution, State: opstask.LastOperationStateInProgress,
			Description: "taking a snapshot", RunID: "r1", LastUpdateTime: now}})
	waitFor(t, func() bool { return strings.Contains(out.String(), "taking a snapshot") })
	setStatus(t, c, "snap", opstask.Status{State: opstask.TaskStateFailed,
		LastOperation: &opstask.LastOperation{Type: opstask.LastOperationTypeExecution, State: opstask.LastOperationStateFailed,
			Description: "bucket unreachable", RunID: "r1", LastUpdateTime: now},
		LastErrors: []opstask.LastError{{Code: "StoreError", Description: "bucket unreachable", ObservedAt: now}}})
	select {
	case r := <-done:
		if r.err != nil || r.state != opstask.TaskStateFailed {
			t.Fatalf("Wait = %s, %v; want Failed", r.state, r.err)
		}
		if code := taskctl.ExitCode(r.state, r.err); code != taskctl.ExitFailed {
			t.Errorf("exit code %d, want %d", code, taskctl.ExitFailed)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("Wait did not return; printed:\n%s", out.String())
	}
	got := out.String()
	for _, want := range []string{"Pending\n", "InProgress  Execution/InProgress  taking a snapshot", "Failed  Execution/Failed  bucket unreachable", "error StoreError (above)"} {
		if !strings.Contains(got, want) {
			t.Errorf("printed:\n%s\nwant a line with %q", got, want)
		}
	}
}

func TestWaitEndsOnMissingDeletedOrLateTasks(t *testing.T) {
	tasks, c := setup(t)
	ctx := context.Background()
	if _, err := tasks.Wait(ctx, "absent", &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "testtask/absent not found") {
		t.Errorf("Wait on a missing task = %v, want not found", err)
	}

	create(t, c, "late", "snapshot", "main")
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	state, err := tasks.Wait(short, "late", &bytes.Buffer{})
	if !errors.Is(err, taskctl.ErrNotFinished) || state != opstask.TaskStatePending || taskctl.ExitCode(state, err) != taskctl.ExitFailed {
		t.Errorf("Wait past its context = %s, %v; want Pending, ErrNotFinished", state, err)
	}

	create(t, c, "gone", "snapshot", "main")
	done := make(chan error, 1)
	var out syncBuffer
	go func() { _, err := tasks.Wait(ctx, "gone", &out); done <- err }()
	waitFor(t, func() bool { return strings.Contains(out.String(), "Pending") })
	if err := c.Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "testtask/gone was deleted while Pending") {
			t.Errorf("Wait on a deleted task = %v, want deleted while Pending", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Wait did not return after the deletion")
	}
}

func TestList(t *testing.T) {
	tasks, c := setup(t)
	create(t, c, "a", "snapshot", "main")
	create(t, c, "b", "defragment", "backup")
	setStatus(t, c, "b", opstask.Status{State: opstask.TaskStateSucceeded,
		LastOperation: &opstask.LastOperation{Type: opstask.LastOperationTypeExecution, State: opstask.LastOperationStateCompleted,
			Description: "defragmented", RunID: "r1", LastUpdateTime: metav1.NewTime(time.Now().Truncate(time.Second))}})
	var out bytes.Buffer
	if err := tasks.List(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("list:\n%s\nwant a header and two tasks", out.String())
	}
	for i, want := range [][]string{{"a", "main", "snapshot", "Pending"}, {"b", "backup", "defragment", "Succeeded", "Execution/Completed: defragmented"}} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("line %q, want %q in it", lines[i+1], w)
			}
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
