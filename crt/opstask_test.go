package crt_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// storeOnly is an opstask.Store without a Watch method.
type storeOnly struct{ opstask.Store }

// An opstask Controller on a manager that never becomes leader (another
// holder keeps the Lease) still runs tasks, and learns of new ones from the
// manager's informer: its own resync is an hour away.
func TestOpstaskRunsOnEveryReplicaFedByTheCache(t *testing.T) {
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := opstasktest.InstallCRD(ctx, dyn); err != nil {
		t.Fatal(err)
	}

	// The election is held by another replica for the whole test.
	const election = "opstask-test"
	now := metav1.NewMicroTime(time.Now())
	_, err = env.Client.CoordinationV1().Leases(env.Namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: election},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("the-leader"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                  scheme.Scheme,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		LeaderElection:          true,
		LeaderElectionID:        election,
		LeaderElectionNamespace: env.Namespace,
		Cache:                   cache.Options{DefaultNamespaces: map[string]cache.Config{env.Namespace: {}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	store, err := kubestore.New(kubestore.Config{Client: dyn, Resource: opstasktest.Resource, Kind: opstasktest.GroupVersionKind.Kind,
		Namespace: env.Namespace, TargetField: opstasktest.TargetField})
	if err != nil {
		t.Fatal(err)
	}
	tasks := &unstructured.Unstructured{}
	tasks.SetGroupVersionKind(opstasktest.GroupVersionKind)
	var executed atomic.Int32
	ctl, err := opstask.New(opstask.Config{
		// storeOnly hides kubestore's own watch: news can come only from
		// the manager's informer.
		Store: crt.TaskStore(storeOnly{store}, mgr.GetCache(), tasks),
		Handlers: []opstask.Handler{{Name: "snapshot",
			Executor: opstask.ExecutorFunc(func(context.Context, *opstask.Run) error { executed.Add(1); return nil })}},
		Identity:     "replica-b",
		ResyncPeriod: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(crt.EveryReplica(ctl.Run)); err != nil {
		t.Fatal(err)
	}
	var leaderRan atomic.Bool
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { leaderRan.Store(true); <-ctx.Done(); return nil })); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	succeeded := func(name string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			list, err := store.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range list {
				if task.Name == name && task.State() == opstask.TaskStateSucceeded {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s not Succeeded after 30s (executions %d)", name, executed.Load())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	create := func(name string) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"config": map[string]any{"snapshot": map[string]any{}}, opstasktest.TargetField: name}}}
		u.SetGroupVersionKind(tasks.GroupVersionKind())
		u.SetNamespace(env.Namespace)
		u.SetName(name)
		if _, err := dyn.Resource(opstasktest.Resource).Namespace(env.Namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("first")
	succeeded("first")
	// The controller has synced and waits for news: only the informer can
	// bring it the second task within the test.
	create("second")
	succeeded("second")
	if n := executed.Load(); n != 2 {
		t.Errorf("executions %d, want 2", n)
	}
	if leaderRan.Load() {
		t.Error("the manager became leader: the test proves nothing about followers")
	}
}
