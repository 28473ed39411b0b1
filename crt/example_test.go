package crt_test

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
)

// A reconciler of a controller-runtime manager that collects the expired
// claims of its namespace: lifecycle takes the manager's client for writes
// and cached reads, and its API reader for the reads it needs fresh.
func Example_lifecycle() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	m, err := lifecycle.New(lifecycle.Config{
		Client:     crt.LifecycleClient(mgr.GetClient(), mgr.GetAPIReader()),
		Recorder:   crt.Events(mgr.GetEventRecorder("claim-collector")),
		DefaultTTL: 7 * 24 * time.Hour,
	})
	if err != nil {
		panic(err)
	}
	collect := func(ctx context.Context, namespace string) (ctrl.Result, error) {
		res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: lifecycle.Scope{
			Namespace: namespace,
			Claims:    crt.ClaimCache(mgr.GetClient()),
			Pods:      crt.PodCache(mgr.GetClient()),
		}})
		return crt.Result(ctx, res.RequeueAfter, err)
	}
	_ = collect // called from the reconciler's Reconcile
}

// Backup credentials from a Secret, read through the manager's API reader
// (the manager does not start an informer on every Secret).
func Example_backupstore() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	open := func(ctx context.Context, namespace, secret, url string) error {
		creds, err := backupstore.LoadCredentials(ctx, crt.Secrets(mgr.GetAPIReader()), namespace, secret, "s3")
		if err != nil {
			return err // errors.Is(err, backupstore.ErrSecretNotFound): requeue
		}
		bucket, err := backupstore.OpenBucket(ctx, url, creds)
		if err != nil {
			return err
		}
		return bucket.Close()
	}
	_ = open
}

// The global operator lock in a ConfigMap, read through the API reader
// (every transaction starts from a read of the API server) and written
// through the manager's client.
func Example_kubelock() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	backend, err := kubelock.New(kubelock.Config{
		Client:    crt.ConfigMaps(mgr.GetClient(), mgr.GetAPIReader()),
		Namespace: "databases",
		Name:      "my-operator-lock",
	})
	if err != nil {
		panic(err)
	}
	lock, err := locking.New(locking.Config{Backend: backend, LockID: "dc1"})
	if err != nil {
		panic(err)
	}
	_ = lock // lock.Take(ctx) in the global steps of a reconcile
}

// An opstask controller on every replica of the manager (it is safe with
// several: tasks are claimed through the store), told of changes by the
// manager's informer on the task kind.
func Example_opstask() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		panic(err)
	}
	gvk := schema.GroupVersionKind{Group: "ops.example.com", Version: "v1", Kind: "EtcdOpsTask"}
	store, err := kubestore.New(kubestore.Config{
		Client:    dynamic.NewForConfigOrDie(mgr.GetConfig()),
		Resource:  gvk.GroupVersion().WithResource("etcdopstasks"),
		Kind:      gvk.Kind,
		Namespace: "databases",
	})
	if err != nil {
		panic(err)
	}
	task := &unstructured.Unstructured{}
	task.SetGroupVersionKind(gvk)
	var handlers []opstask.Handler // one per task kind: its executor, preconditions, cleanup
	ctl, err := opstask.New(opstask.Config{Store: crt.TaskStore(store, mgr.GetCache(), task), Handlers: handlers})
	if err != nil {
		panic(err) // with no handlers: opstask.ErrInvalidConfig
	}
	if err := mgr.Add(crt.EveryReplica(ctl.Run)); err != nil {
		panic(err)
	}
}
