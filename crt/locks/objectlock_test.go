package locks_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/crt/locks"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// A per-object lock (kubelock.ForObject) wakes the instance waiting for
// it when it is released: the waiter's controller Owns ConfigMaps, and the
// release is a change of the lock's ConfigMap, owned by the object. The
// holder's lease is 10 minutes and the waiter's requeue says so; the
// waiter takes the lock right after the release all the same. (Without
// Owns, the test fails: the waiter sleeps until the lease's end.)
func TestObjectLockReleaseWakesTheWaiter(t *testing.T) {
	kube := testenv.StartKubernetes(t)
	ctx := t.Context()
	// The object the lock is for: a Secret standing for a database.
	db, err := kube.Client.CoreV1().Secrets(kube.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gvk := corev1.SchemeGroupVersion.WithKind("Secret")
	lockOf := func(c kubelock.Client, id string) *locking.Lock {
		t.Helper()
		cfg, err := kubelock.ForObject(c, db, gvk)
		if err != nil {
			t.Fatal(err)
		}
		b, err := kubelock.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		l, err := locking.New(locking.Config{Backend: b, LockID: id, Duration: 10 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	holder := lockOf(kubelock.ClientGo(kube.Client.CoreV1()), "instance-a")
	if _, err := holder.Take(ctx); err != nil {
		t.Fatal(err)
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mgr := kube.NewManager(t, scheme)
	waiter := lockOf(locks.ConfigMaps(mgr.GetClient(), mgr.GetAPIReader()), "instance-b")
	var refused, took atomic.Int64
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.Secret{}).Owns(&corev1.ConfigMap{}).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			if req.Name != "db" {
				return reconcile.Result{}, nil
			}
			_, err := waiter.Do(ctx, func(context.Context, locking.Lease) error {
				took.Add(1)
				return nil
			}, &locking.DoOptions{Release: true})
			if held := (*locking.HeldError)(nil); errors.As(err, &held) {
				refused.Add(1)
				return reconcile.Result{RequeueAfter: held.RequeueAfter}, nil
			}
			return reconcile.Result{}, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	wait := func(what string, done func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !done(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within a minute (refused %d, took %d); the holder's lease lasts 10", what, refused.Load(), took.Load())
			}
		}
	}
	wait("the waiter refused while the lock is held", func() bool { return refused.Load() > 0 })
	if took.Load() != 0 {
		t.Fatal("the waiter took a held lock")
	}
	if _, _, err := holder.Release(ctx, nil); err != nil {
		t.Fatal(err)
	}
	wait("the waiter woken by the release", func() bool { return took.Load() > 0 })
}
