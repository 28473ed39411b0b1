package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/groundskeeper-io/groundskeeper/crt/tasks"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// taskScheme is a scheme with the core types and opstasktest's TestTask.
func taskScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypeWithName(opstasktest.GroupVersionKind, &opstasktest.TestTask{})
	s.AddKnownTypeWithName(opstasktest.GroupVersionKind.GroupVersion().WithKind("TestTaskList"), &opstasktest.TestTaskList{})
	metav1.AddToGroupVersion(s, opstasktest.GroupVersionKind.GroupVersion())
	return s
}

// newTaskManager returns a manager of the test's namespace, with metrics
// and probes off, and with opts applied; it installs (or upgrades) the
// TestTask CRD through the manager's clients before the manager starts.
func newTaskManager(t testing.TB, env *testenv.Kubernetes, opts ...func(*manager.Options)) manager.Manager {
	t.Helper()
	mgr := env.NewManager(t, taskScheme(t), opts...)
	crd, err := tasks.CRD(opstasktest.CRD, &opstasktest.TestTask{}, mgr.GetScheme(), &tasks.Options{TargetField: opstasktest.TargetField})
	if err != nil {
		t.Fatal(err)
	}
	if err := tasks.InstallCRD(t.Context(), mgr.GetClient(), mgr.GetAPIReader(), crd); err != nil {
		t.Fatal(err)
	}
	return mgr
}

// testTask renders a task as a TestTask object of namespace ns.
func testTask(ns string, task *opstask.Task) *unstructured.Unstructured {
	cfg := map[string]any{}
	for name, raw := range task.Spec.Config {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			panic(err)
		}
		cfg[name] = v
	}
	spec := map[string]any{"config": cfg}
	if task.Spec.Target != "" {
		spec[opstasktest.TargetField] = task.Spec.Target
	}
	if ttl := task.Spec.TTLSecondsAfterFinished; ttl != nil {
		spec["ttlSecondsAfterFinished"] = int64(*ttl)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(opstasktest.GroupVersionKind)
	u.SetNamespace(ns)
	u.SetName(task.Name)
	if len(task.Approvals) > 0 {
		u.SetAnnotations(map[string]string{opstask.ApprovalAnnotation: strings.Join(task.Approvals, ",")})
	}
	return u
}

// The store over a manager's clients passes opstask's store conformance
// suite against the real API server, the controller runs of the suite
// included.
func TestTaskStoreConformance(t *testing.T) {
	opstasktest.Run(t, func(t *testing.T) opstasktest.Harness {
		env := testenv.StartKubernetes(t)
		mgr := newTaskManager(t, env)
		store, err := tasks.NewStore(mgr, &opstasktest.TestTask{}, &tasks.Options{TargetField: opstasktest.TargetField, Namespace: env.Namespace})
		if err != nil {
			t.Fatal(err)
		}
		testenv.StartManager(t, mgr)
		return opstasktest.Harness{
			Store: store,
			Create: func(ctx context.Context, task *opstask.Task) (*opstask.Task, error) {
				u := testTask(env.Namespace, task)
				if err := mgr.GetClient().Create(ctx, u); err != nil {
					return nil, err
				}
				return kubestore.Decode(u, opstasktest.TargetField)
			},
			Approve: func(ctx context.Context, name, token string) error {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(opstasktest.GroupVersionKind)
				u.SetNamespace(env.Namespace)
				u.SetName(name)
				patch := `{"metadata":{"annotations":{"` + opstask.ApprovalAnnotation + `":"` + token + `"}}}`
				return mgr.GetClient().Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch)))
			},
		}
	})
}

// An opstask controller made from a manager alone (no client of its own)
// runs tasks to Succeeded on a manager that never becomes leader (another
// holder keeps the Lease), learning of new tasks from the store's watch
// (its own resync is an hour away). Two controllers on one
// manager, with metrics on one registry, register them once and count into
// the same series.
func TestTaskControllerFromTheManagerAlone(t *testing.T) {
	env := testenv.StartKubernetes(t)
	ctx := t.Context()

	// The election is held by another replica for the whole test.
	const election = "opstask-test"
	now := metav1.NewMicroTime(time.Now())
	_, err := env.Client.CoordinationV1().Leases(env.Namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: election},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("the-leader"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mgr := newTaskManager(t, env, func(o *manager.Options) {
		o.LeaderElection = true
		o.LeaderElectionID = election
		o.LeaderElectionNamespace = env.Namespace
	})
	reg := prometheus.NewRegistry()
	var executed atomic.Int32
	cfg := opstask.Config{
		Handlers: []opstask.Handler{{Name: "snapshot",
			Executor: opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { executed.Add(1); return nil })}},
		ResyncPeriod: time.Hour,
	}
	opts := &tasks.Options{TargetField: opstasktest.TargetField, Namespace: env.Namespace,
		Metrics: &opstask.MetricsConfig{Registerer: reg, Prefix: "test_"}}
	for range 2 {
		if err := (&tasks.Controller{Object: &opstasktest.TestTask{}, Config: cfg, Options: opts}).SetupWithManager(mgr); err != nil {
			t.Fatalf("SetupWithManager: %v", err)
		}
	}
	var leaderRan atomic.Bool
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { leaderRan.Store(true); <-ctx.Done(); return nil })); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	succeeded := func(name string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			var task opstasktest.TestTask
			if err := mgr.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, &task); err != nil {
				t.Fatal(err)
			}
			if task.Status.State == opstask.TaskStateSucceeded {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s is %q after 2 minutes, want Succeeded (executions %d)", name, task.Status.State, executed.Load())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	create := func(name string) {
		t.Helper()
		task := &opstask.Task{Name: name, Spec: opstask.Spec{Config: map[string]json.RawMessage{"snapshot": json.RawMessage(`{}`)}, Target: name}}
		if err := mgr.GetClient().Create(ctx, testTask(env.Namespace, task)); err != nil {
			t.Fatal(err)
		}
	}
	create("first")
	succeeded("first")
	// The controllers have synced and wait for news: only the store's
	// watch can bring them the second task within the test.
	create("second")
	succeeded("second")
	if n := executed.Load(); n != 2 {
		t.Errorf("executions %d, want 2", n)
	}
	if leaderRan.Load() {
		t.Error("the manager became leader: the test proves nothing about followers")
	}
	// One family per metric, however many controllers; one series per
	// target, counted once. A task's count follows its status write, so
	// the test waits for it.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		seen, succeededBy := gatherTaskMetrics(t, reg)
		if succeededBy["first"] == 1 && succeededBy["second"] == 1 && len(succeededBy) == 2 {
			if seen["test_operator_tasks_total"] != 1 || seen["test_operator_task_duration_seconds"] != 1 {
				t.Errorf("metric families %v, want each once", seen)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("test_operator_tasks_total{state=Succeeded} by target = %v after 2 minutes, want first and second at 1", succeededBy)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gatherTaskMetrics returns how many times each metric family appears in
// reg, and test_operator_tasks_total{state=Succeeded} by target.
func gatherTaskMetrics(t *testing.T, reg *prometheus.Registry) (seen map[string]int, succeededBy map[string]float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen, succeededBy = map[string]int{}, map[string]float64{}
	for _, f := range families {
		seen[f.GetName()]++
		if f.GetName() != "test_operator_tasks_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["state"] == string(opstask.TaskStateSucceeded) {
				succeededBy[labels["target"]] += m.GetCounter().GetValue()
			}
		}
	}
	return seen, succeededBy
}

// Controller and NewStore refuse what they cannot serve before
// anything runs, naming it: a task object whose kind they cannot tell, and
// metrics opstask refuses. No API server is needed to refuse.
func TestTaskControllerRefusesBadOptions(t *testing.T) {
	mgr, err := ctrl.NewManager(&rest.Config{Host: "http://127.0.0.1:1"}, ctrl.Options{
		Scheme:                 taskScheme(t),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	handlers := []opstask.Handler{{Name: "snapshot", Executor: opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })}}
	type unregistered struct{ opstasktest.TestTask }
	tests := []struct {
		name string
		obj  client.Object
		opts *tasks.Options
		want string
	}{
		{"a type the scheme does not know", &unregistered{}, nil, "unregistered"},
		{"an unstructured object without its kind", &unstructured.Unstructured{}, nil, "'Kind' is missing"},
		{"an unstructured object without its version", kindOnly(), nil, "'apiVersion' is missing"},
		{"a nil object", nil, nil, "task object is nil"},
		{"metrics opstask refuses", &opstasktest.TestTask{}, &tasks.Options{Metrics: &opstask.MetricsConfig{Registerer: prometheus.NewRegistry(), TargetLabel: "type"}},
			`MetricsConfig.TargetLabel = "type"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := (&tasks.Controller{Object: tc.obj, Config: opstask.Config{Handlers: handlers}, Options: tc.opts}).SetupWithManager(mgr)
			if !errors.Is(err, opstask.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidConfig with %q", err, tc.want)
			}
		})
	}
}

func kindOnly() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetKind("TestTask")
	return u
}

// Finished tasks the store lists when the controller starts are delivered
// by reference and deleted when their TTL runs out (on the controller's
// fake clock), each after a fresh read; a task deleted and created again
// under the same name, and run to the end, with a longer TTL, is not
// deleted with the old one's TTL.
func TestTaskStoreDeletesFinishedTasksKeptByReference(t *testing.T) {
	env := testenv.StartKubernetes(t)
	ctx := t.Context()
	mgr := newTaskManager(t, env)
	cli := mgr.GetClient()
	clk := clocktesting.NewFakeClock(time.Now())
	create := func(name string, ttl int32, finished bool) *unstructured.Unstructured {
		t.Helper()
		task := &opstask.Task{Name: name, Spec: opstask.Spec{Config: map[string]json.RawMessage{"snapshot": json.RawMessage(`{}`)},
			Target: "etcd", TTLSecondsAfterFinished: &ttl}}
		u := testTask(env.Namespace, task)
		if err := cli.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		if !finished {
			return u
		}
		st := opstask.Status{}
		for _, s := range []opstask.TaskState{opstask.TaskStateInProgress, opstask.TaskStateSucceeded} {
			if err := st.Transition(s, clk.Now(), "test", "finished before the controller"); err != nil {
				t.Fatal(err)
			}
		}
		status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
		if err != nil {
			t.Fatal(err)
		}
		u.Object["status"] = status
		if err := cli.Status().Update(ctx, u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	get := func(name string) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(opstasktest.GroupVersionKind)
		err := mgr.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, u)
		return u, err
	}
	const hour = 3600
	for _, name := range []string{"done-0", "done-1", "done-2"} {
		create(name, hour, true)
	}
	cfg := opstask.Config{Clock: clk, Handlers: []opstask.Handler{{Name: "snapshot", AllowDuplicates: true,
		Executor: opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { return nil })}}}
	ctl := &tasks.Controller{Object: &opstasktest.TestTask{}, Config: cfg,
		Options: &tasks.Options{TargetField: opstasktest.TargetField, Namespace: env.Namespace}}
	if err := ctl.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	// A task run to the end: the controller has listed the finished ones.
	create("probe", 2*hour, false)
	waitFor := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 2 minutes", what)
			}
			clk.Step(time.Second) // the controller's timers: Settle, then the TTLs
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("probe Succeeded", func() bool {
		u, err := get("probe")
		state, _, _ := unstructured.NestedString(u.Object, "status", "state")
		return err == nil && state == string(opstask.TaskStateSucceeded)
	})
	old, err := get("done-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	// Created again, it runs: its status is the controller's.
	again := create("done-1", 3*hour, false)
	waitFor("done-1 created again Succeeded", func() bool {
		u, err := get("done-1")
		state, _, _ := unstructured.NestedString(u.Object, "status", "state")
		return err == nil && state == string(opstask.TaskStateSucceeded)
	})
	clk.Step(hour * time.Second)
	gone := func(name string) bool {
		_, err := get(name)
		return apierrors.IsNotFound(err)
	}
	waitFor("done-0 and done-2 deleted after their TTL", func() bool { return gone("done-0") && gone("done-2") })
	u, err := get("done-1")
	if err != nil {
		t.Fatalf("done-1, created again with a TTL of 3 hours, was deleted after the old one's TTL: %v", err)
	}
	if u.GetUID() != again.GetUID() || u.GetUID() == old.GetUID() {
		t.Errorf("done-1: UID %s, want the new task's %s", u.GetUID(), again.GetUID())
	}
	if gone("probe") {
		t.Error("probe, TTL 2 hours, deleted after 1 hour")
	}
}
