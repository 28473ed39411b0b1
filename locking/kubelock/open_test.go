package kubelock_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// A configmap:// URL opens a backend whose lock is the named ConfigMap on
// the real API server.
func TestOpenerURL(t *testing.T) {
	kube := testenv.StartKubernetes(t)
	ctx := context.Background()
	openers := map[string]locking.Opener{"configmap": kubelock.Opener(kubelock.ClientGo(kube.Client.CoreV1()))}
	b, closer, err := locking.Open(ctx, "configmap://"+kube.Namespace+"/db-lock", openers)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	l, err := locking.New(locking.Config{Backend: b, LockID: "dc1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.Client.CoreV1().ConfigMaps(kube.Namespace).Get(ctx, "db-lock", metav1.GetOptions{}); err != nil {
		t.Fatalf("the lock's ConfigMap: %v", err)
	}
	for _, raw := range []string{"configmap:///db-lock", "configmap://ns", "configmap://ns/a/b", "configmap://ns/a?x=1"} {
		_, _, err := locking.Open(ctx, raw, openers)
		if !errors.Is(err, locking.ErrInvalidConfig) || !strings.Contains(err.Error(), "want configmap://namespace/name") {
			t.Errorf("Open(%q) = %v, want ErrInvalidConfig with the form", raw, err)
		}
	}
}
