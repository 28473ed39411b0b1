package kubelock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// A lock of one object (ForObject) is a ConfigMap named after it, owned by
// it, created by the first take; the garbage collector deletes it with the
// object, and a second object's lock is another ConfigMap.
func TestForObjectLockGoesWithItsObject(t *testing.T) {
	kube := testenv.StartKubernetes(t)
	ctx := t.Context()
	cms := kube.Client.CoreV1().ConfigMaps(kube.Namespace)
	take := func(name string) {
		t.Helper()
		// The object a lock is for: a ConfigMap standing for a database.
		db, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := kubelock.ForObject(kubelock.ClientGo(kube.Client.CoreV1()), db, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := kubelock.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		l, err := locking.New(locking.Config{Backend: b, LockID: "operator-0"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Take(ctx); err != nil {
			t.Fatal(err)
		}
	}
	take("db")
	take("other")
	lock, err := cms.Get(ctx, "configmap-db-lock", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the lock of configmap db: %v", err)
	}
	db, err := cms.Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if refs := lock.OwnerReferences; len(refs) != 1 || refs[0].UID != db.UID || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("the lock's owner references %+v; want db (UID %s) as controller", refs, db.UID)
	}
	if lock.Labels[kubelock.LabelLockOf] != "configmap-db-lock" {
		t.Errorf("the lock's labels %v; want %s=configmap-db-lock", lock.Labels, kubelock.LabelLockOf)
	}
	if err := cms.Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cms.Get(ctx, "configmap-db-lock", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("the lock of the deleted db is still there: %v", err)
	}
	if _, err := cms.Get(ctx, "configmap-other-lock", metav1.GetOptions{}); err != nil {
		t.Errorf("the lock of another object: %v; want it kept", err)
	}
}

func TestForObjectRefusesAnObjectWithoutUID(t *testing.T) {
	_, err := kubelock.ForObject(nil, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "db"}}, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if !errors.Is(err, locking.ErrInvalidConfig) || !strings.Contains(err.Error(), `"db"`) {
		t.Errorf("ForObject of an object without a UID: %v; want ErrInvalidConfig naming it", err)
	}
}

func TestForObjectNamesALongObjectWithinALabel(t *testing.T) {
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 80), Namespace: "ns", UID: "u"}}
	a, err := kubelock.ForObject(nil, obj, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err != nil {
		t.Fatal(err)
	}
	obj.Name = strings.Repeat("a", 79) + "b"
	b, err := kubelock.ForObject(nil, obj, corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Name) > 63 || len(b.Name) > 63 || a.Name == b.Name {
		t.Errorf("lock names %q and %q; want two different names of at most 63 characters", a.Name, b.Name)
	}
}
