package claims_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/crt/claims"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// Collector on a started manager: a claim whose pod is deleted is
// marked unmounted, and deleted (with an event) once its TTL has passed
// on the manager's clock; a claim outside the selector, and one whose pod
// stays, are left alone. A dry-run collection beside it marks and deletes
// nothing.
func TestCollectorOnAManager(t *testing.T) {
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	ann := lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix}
	withLabels := func(c *corev1.PersistentVolumeClaim, l map[string]string) *corev1.PersistentVolumeClaim {
		c.Labels = l
		return c
	}
	for _, c := range []*corev1.PersistentVolumeClaim{
		withLabels(claim("data-0", ann.Track("pod-0", time.Hour)), map[string]string{"app": "db"}),
		withLabels(claim("data-1", ann.Track("pod-1", time.Hour)), map[string]string{"app": "db"}),
		claim("data-2", ann.Track("pod-2", time.Hour)), // outside the selector
	} {
		if _, err := env.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range []string{"pod-0", "pod-1", "pod-2"} {
		if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod(name, []string{"data-0", "data-1", "data-2"}[i]), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	clk := testingclock.NewFakeClock(time.Now())
	var mu sync.Mutex
	var events []string
	recorder := lifecycle.EventFunc(func(obj runtime.Object, eventtype, reason, _ string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, obj.(*corev1.ObjectReference).Name+" "+reason)
	})
	mgr := env.NewManager(t, scheme.Scheme)
	client := claims.Client(mgr.GetClient(), mgr.GetAPIReader())
	lc, err := lifecycle.New(lifecycle.Config{Client: client, Clock: clk, Annotations: ann})
	if err != nil {
		t.Fatal(err)
	}
	selector, _ := labels.Parse("app=db")
	scope := lifecycle.Scope{Namespace: ns, Selector: selector, Claims: claims.Cache(mgr.GetClient()), Pods: claims.PodCache(mgr.GetClient())}
	passes := make(chan lifecycle.CollectResult, 100)
	for _, dry := range []bool{true, false} {
		name := map[bool]string{true: "claims-dry", false: "claims"}[dry]
		cc := claims.Collector{
			UnmountTracker: claims.UnmountTracker{Lifecycle: lc, Claims: client, Scope: scope, DryRun: dry},
			Name:           name, Recorder: recorder, Clock: clk,
		}
		if !dry {
			cc.OnPass = func(_ time.Time, r lifecycle.CollectResult) { passes <- r }
		}
		if err := cc.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	testenv.StartManager(t, mgr)

	get := func(name string) *corev1.PersistentVolumeClaim {
		c, err := env.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	marked := func(name string) bool {
		c := get(name)
		_, ok := c.Annotations[ann.LastUnmountedKey()]
		return ok
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if ok() {
				return
			}
		}
		t.Fatalf("timed out waiting: %s", what)
	}
	for _, name := range []string{"pod-1", "pod-2"} {
		if err := env.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually("data-1 marked unmounted", func() bool { return marked("data-1") })
	if marked("data-0") || marked("data-2") {
		t.Errorf("marks: data-0 %v (its pod stays), data-2 %v (outside the selector); want none", marked("data-0"), marked("data-2"))
	}

	clk.Step(time.Hour + time.Second)
	eventually("data-1 deleted after its TTL", func() bool {
		c := get("data-1")
		return c == nil || c.DeletionTimestamp != nil
	})
	for _, name := range []string{"data-0", "data-2"} {
		if c := get(name); c == nil || c.DeletionTimestamp != nil {
			t.Errorf("claim %s deleted", name)
		}
	}
	eventually("one ClaimCollected event, from the real collection only", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Equal(events, []string{"data-1 " + lifecycle.ReasonClaimCollected})
	})
	select {
	case <-passes:
	default:
		t.Error("OnPass was not called")
	}
}
