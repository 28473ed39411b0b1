package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/groundskeeper-io/groundskeeper/examples/internal/rbactest"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/retention"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// TestClaimsOnNodes runs the collector's claim paths with pods that live,
// on a fake node: pods Running, their claims bound to volumes when they are
// scheduled, and a deleted pod Terminating for its grace period with its
// claim mounted. Whatever the claim's mark says (a stale, long expired
// last-unmounted-on, as a late event of an earlier pod leaves), the
// terminating pod's claim is neither deleted by the collector nor by the
// operator's CheckReuse before the pod is gone, nor marked unmounted; once
// the pod is gone it is marked, and its pvc-ttl counts from then. A watch
// of the claims fails the test if any is deleted while its pod exists.
func TestClaimsOnNodes(t *testing.T) {
	k := testenv.StartKubernetes(t)
	installCRD(t, k.Config)
	k.StartNodes(t, nil)
	pool := k.NewVolumePool(t, &testenv.VolumeOptions{Count: 2})
	ctx := t.Context()
	ns := k.Namespace
	ann := lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix}
	const ttl = 3 * retention.Day
	// Long enough for the collector's replica to start and run its passes
	// while pod-1 terminates, which the test verifies.
	const grace = 20
	for i := range 2 {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-%d", i), Labels: map[string]string{"app": "aerospike"},
				Annotations: ann.Track(fmt.Sprintf("pod-%d", i), ttl)},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: &pool.StorageClass,
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		if _, err := k.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createPodWithGrace(t, k, i, grace)
	}
	eventually(t, "pods Running, claims Bound", func() error {
		for i := range 2 {
			p, err := k.Client.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("pod-%d", i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			c, err := k.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, fmt.Sprintf("data-%d", i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning || c.Status.Phase != corev1.ClaimBound {
				return fmt.Errorf("pod %s %s, claim %s %s", p.Name, p.Status.Phase, c.Name, c.Status.Phase)
			}
		}
		return nil
	})
	guardClaims(t, k)

	if err := k.Client.CoreV1().Pods(ns).Delete(ctx, "pod-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if p, err := k.Client.CoreV1().Pods(ns).Get(ctx, "pod-1", metav1.GetOptions{}); err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("pod-1 right after its deletion: %v, %v; want it Terminating for %d s", p, err, grace)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	stale := func() {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			ann.LastUnmountedKey(): clk.Now().Add(-2 * ttl).UTC().Format(time.RFC3339)}}})
		if _, err := k.Client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "data-1", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The operator brings pod-1 back (its next incarnation, with a cache
	// that missed the terminating one) on a stale, expired mark: CheckReuse
	// waits and deletes nothing.
	stale()
	lc, err := lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(k.Client.CoreV1()), Clock: clk, Annotations: ann})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := lc.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "pod-1", Claim: "data-1"}, nil)
	if err != nil || dec.Verdict != lifecycle.VerdictWait {
		t.Errorf("CheckReuse of an expired claim while its pod terminates = %+v, %v; want VerdictWait", dec, err)
	}
	assertClaims(t, k, "data-0", "data-1")

	// The collector, on the stale mark again: the claim is mounted, so it
	// removes the mark and deletes nothing; nor does it mark the claim.
	stale()
	reports := make(chan report, 100)
	startManager(t, k.Config, controllerOptions{namespace: ns, retryAfter: time.Minute, claimSelector: "app=aerospike"},
		clk, &rbactest.Recorder{}, reports)
	waitClaimPass(t, reports, clk.Now())
	eventually(t, "stale mark removed from data-1", func() error {
		c, err := k.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v, ok := c.Annotations[ann.LastUnmountedKey()]; ok {
			return fmt.Errorf("claim data-1 still marked unmounted at %s", v)
		}
		return nil
	})
	assertClaims(t, k, "data-0", "data-1")
	if _, err := k.Client.CoreV1().Pods(ns).Get(ctx, "pod-1", metav1.GetOptions{}); err != nil {
		t.Fatalf("pod-1 was gone before the checks ended (%v): the machine is too slow for a %d s grace period", err, grace)
	}

	// Once the pod is gone the claim is marked, at the collector's now,
	// and deleted once its pvc-ttl has passed since then, not before.
	eventually(t, "pod-1 gone and claim data-1 marked unmounted", func() error {
		c, err := k.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := clk.Now().UTC().Format(time.RFC3339)
		if v := c.Annotations[ann.LastUnmountedKey()]; v != want {
			return fmt.Errorf("claim data-1: last-unmounted-on %q, want %q", v, want)
		}
		return nil
	})
	stepAfterRequeues(t, clk, ttl-time.Minute)
	// No requeue is due before the expiry: a change of a claim brings a
	// pass.
	touch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"touched": "yes"}}})
	if _, err := k.Client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "data-0", types.MergePatchType, touch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitClaimPass(t, reports, clk.Now())
	assertClaims(t, k, "data-0", "data-1")
	stepAfterRequeues(t, clk, 2*time.Minute)
	eventually(t, "claim data-1 collected", func() error { return claimsAre(k, "data-0") })
}

// waitClaimPass waits for a claim pass that ran at or after now (there are
// no backups here, so no backup pass).
func waitClaimPass(t *testing.T, reports <-chan report, now time.Time) {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case r := <-reports:
			if r.Claims && !r.Now.Before(now) {
				return
			}
		case <-timeout:
			t.Fatalf("no claim pass at or after %s", now.Format(time.RFC3339))
		}
	}
}

// createPodWithGrace creates pod-<i>, which mounts claim data-<i>, with a
// grace period of grace seconds.
func createPodWithGrace(t *testing.T, k *testenv.Kubernetes, i int, grace int64) {
	t.Helper()
	_, err := k.Client.CoreV1().Pods(k.Namespace).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i)},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(grace),
			Containers: []corev1.Container{{Name: "aerospike", Image: "aerospike/aerospike-server",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/opt/aerospike/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("data-%d", i)}}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// guardClaims watches the namespace's claims until the test ends and fails
// it when claim data-<i> is being deleted, or gone, while pod-<i> exists.
// A pod once gone never comes back in these tests, so a pod read after the
// deletion was seen existed when the claim was deleted.
func guardClaims(t *testing.T, k *testenv.Kubernetes) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			c, ok := ev.Object.(*corev1.PersistentVolumeClaim)
			if !ok || (ev.Type != watch.Deleted && c.DeletionTimestamp == nil) {
				continue
			}
			pod := "pod-" + strings.TrimPrefix(c.Name, "data-")
			p, err := k.Client.CoreV1().Pods(k.Namespace).Get(ctx, pod, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err), ctx.Err() != nil:
			case err != nil:
				t.Errorf("claim %s deleted; its pod %s: %v", c.Name, pod, err)
			default:
				t.Errorf("claim %s deleted (%s) while its pod %s exists (deletionTimestamp %v)", c.Name, ev.Type, pod, p.DeletionTimestamp)
			}
		}
	}()
}
