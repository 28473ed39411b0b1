package kubelock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

var seq atomic.Int64

// newBackend returns a backend on a ConfigMap of its own in ns.
func newBackend(t testing.TB, client corev1client.ConfigMapsGetter, ns string) *kubelock.Backend {
	t.Helper()
	b, err := kubelock.New(kubelock.Config{Client: kubelock.ClientGo(client), Namespace: ns, Name: fmt.Sprintf("lock-%d", seq.Add(1))})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	kube := testenv.StartKubernetes(t)
	locktest.Run(t, func(t *testing.T) locking.Backend { return newBackend(t, kube.Client.CoreV1(), kube.Namespace) })
}

// TestStorage checks what the ConfigMap holds, through As, and that entries
// that are not lock keys survive the backend's writes.
func TestStorage(t *testing.T) {
	kube := testenv.StartKubernetes(t)
	ctx := t.Context()
	cms := kube.Client.CoreV1().ConfigMaps(kube.Namespace)
	_, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Data:       map[string]string{"note": "kept"},
		BinaryData: map[string][]byte{"not.a-lock-key": []byte("kept")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := kubelock.New(kubelock.Config{Client: kubelock.ClientGo(kube.Client.CoreV1()), Namespace: kube.Namespace, Name: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := locking.New(locking.Config{Backend: b, LockID: "dc1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx); err != nil {
		t.Fatal(err)
	}
	var cm *corev1.ConfigMap
	if !b.As(&cm) {
		t.Fatal("As(**corev1.ConfigMap) = false after a write")
	}
	if got := cm.BinaryData[".ff.02.2forg.2efoundationdb.2ekubernetes-operator.2fglobal"]; len(got) == 0 {
		t.Fatalf("lock record not under its encoded key; binaryData: %v", cm.BinaryData)
	}
	if cm.Data["note"] != "kept" || string(cm.BinaryData["not.a-lock-key"]) != "kept" {
		t.Fatalf("foreign entries changed: data %v, binaryData %v", cm.Data, cm.BinaryData)
	}
	var client kubelock.Client
	if !b.As(&client) || client == nil {
		t.Fatal("As(*kubelock.Client) = false")
	}
	if _, _, err := l.Release(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(context.Background(), "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.BinaryData) != 1 || got.Data["note"] != "kept" {
		t.Fatalf("after release: data %v, binaryData %v; want only the foreign entries", got.Data, got.BinaryData)
	}
}

func BenchmarkLock(b *testing.B) {
	kube := testenv.StartKubernetes(b)
	locktest.RunBenchmarks(b, func(b *testing.B) locking.Backend { return newBackend(b, kube.Client.CoreV1(), kube.Namespace) })
}

// The API server's error stays in the chain beside the package's sentinel:
// a write into a namespace that does not exist is a conflict for the lock
// (the ConfigMap changed under it) and NotFound for apierrors.
func TestErrorsKeepTheAPIServersType(t *testing.T) {
	kube := testenv.StartKubernetes(t)
	b, err := kubelock.New(kubelock.Config{Client: kubelock.ClientGo(kube.Client.CoreV1()), Namespace: "no-such-namespace", Name: "lock"})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Update(t.Context(), func(txn locking.Txn) error { return txn.Set([]byte("k"), []byte("v")) })
	if !errors.Is(err, locking.ErrConflict) || !apierrors.IsNotFound(err) {
		t.Errorf("write into a missing namespace: %v; want locking.ErrConflict and apierrors.IsNotFound", err)
	}
	if !strings.Contains(err.Error(), "no-such-namespace") {
		t.Errorf("error %q does not name the namespace", err)
	}
}
