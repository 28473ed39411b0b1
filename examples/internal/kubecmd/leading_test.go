package kubecmd

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A replica whose controller fails steps down at once, releases the Lease
// and returns the controller's error; one whose context ends returns nil
// after its controller returned.
func TestLeading(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	boom := errors.New("boom")
	start := time.Now()
	err := Leading(ctx, k.Config, k.Namespace, "failing", func(context.Context) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Leading = %v, want %v", err, boom)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Leading returned %s after its function failed", d)
	}
	lease, err := k.Client.CoordinationV1().Leases(k.Namespace).Get(ctx, "failing", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("Lease still held by %q", *h)
	}

	runCtx, stop := context.WithCancel(ctx)
	returned := false
	err = Leading(runCtx, k.Config, k.Namespace, "running", func(ctx context.Context) error {
		stop()
		<-ctx.Done()
		time.Sleep(100 * time.Millisecond) // cleanup after the context ended
		returned = true
		return nil
	})
	if err != nil || !returned {
		t.Errorf("Leading = %v, function returned: %v; want nil after the function returned", err, returned)
	}
}
