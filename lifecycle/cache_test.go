package lifecycle_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"
)

// snapshotLister stands for a cache (lifecycle.ClaimLister and PodLister):
// it serves the objects of one list made before the pass, of every
// namespace, as a cluster-wide cache that ignores the namespace asked for
// would.
type snapshotLister[T any] struct{ items []T }

func (l snapshotLister[T]) ListClaims(context.Context, string, labels.Selector) ([]T, error) {
	return l.items, nil
}

func (l snapshotLister[T]) ListPods(context.Context, string, labels.Selector) ([]T, error) {
	return l.items, nil
}

// With caches in the scope, a collector pass reads claims and pods from
// them; its only requests are one list of pods from the API server to
// confirm that no pod mounts the claims about to be deleted, the deletes,
// and the removal of a mounted claim's out-of-date mark.
func TestCollectorFromCaches(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	counting := &countingTransport{counts: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counting.rt = rt; return counting }
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(kubernetes.NewForConfigOrDie(cfg).CoreV1()), Clock: clk}))
	ann := m.Annotations()
	for i := range 10 {
		since := clk.Now().Add(-10 * time.Minute)
		if i < 3 {
			since = clk.Now().Add(-2 * time.Hour)
		}
		c := newClaim(fmt.Sprintf("data-%d", i), "db", map[string]string{ann.TTLKey(): "1h", ann.PodNameKey(): fmt.Sprintf("db-%d", i),
			ann.LastUnmountedKey(): since.Format(time.RFC3339)})
		must[*corev1.PersistentVolumeClaim](t)(env.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c, metav1.CreateOptions{}))
	}
	// data-0's pod is back and mounts it (its annotation is out of date).
	must[*corev1.Pod](t)(env.Client.CoreV1().Pods(ns).Create(ctx, newPod("db-0", "db", "data-0"), metav1.CreateOptions{}))

	claimList := must[*corev1.PersistentVolumeClaimList](t)(env.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{}))
	podList := must[*corev1.PodList](t)(env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}))
	var claims snapshotLister[*corev1.PersistentVolumeClaim]
	for i := range claimList.Items {
		claims.items = append(claims.items, &claimList.Items[i])
	}
	var pods snapshotLister[*corev1.Pod]
	for i := range podList.Items {
		pods.items = append(pods.items, &podList.Items[i])
	}

	counting.reset()
	res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: lifecycle.Scope{Namespace: ns,
		Claims: claims, Pods: pods}})
	if err != nil {
		t.Fatal(err)
	}
	got := counting.reset()
	if len(res.Deleted) != 2 || len(res.Skipped) != 1 || res.Skipped[0].Claim != "data-0" || res.Skipped[0].Reason != lifecycle.SkipMounted {
		t.Errorf("deleted %v, skipped %v; want data-1 and data-2 deleted, data-0 skipped as mounted", res.Deleted, res.Skipped)
	}
	if got["delete"] != 2 || got["list"] != 1 || got["patch"] != 1 || len(got) != 3 {
		t.Errorf("requests by verb %v, want 2 deletes, 1 list of pods and 1 patch of data-0", got)
	}
	if res.RequeueAfter != 50*time.Minute {
		t.Errorf("requeue after %s, want 50m", res.RequeueAfter)
	}
}
