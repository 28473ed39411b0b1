package testenv_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// unusedCondition is corev1.PersistentVolumeClaimUnused, spelled out so that
// this file also compiles against k8s.io/api v0.35, which lacks it.
const unusedCondition corev1.PersistentVolumeClaimConditionType = "Unused"

// Kubernetes 1.37 records on each claim since when no pod uses it: the
// Unused condition (KEP-5541, feature gate PersistentVolumeClaimUnusedSinceTime,
// beta and on by default in 1.37), set by kube-controller-manager's
// pvc-protection controller, which the test control plane runs, on Bound
// claims only. This test pins who sets it and when: True on a newly bound
// claim, False once a pod that is not terminated names the claim (scheduled
// or not), True again, with a new transition time, once that pod is gone.
// The persistentvolume-binder binds the claim to a volume of the test's
// pool, at once (no pod, no node).
func TestClaimUnusedConditionIsSetByTheControllerManager(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := t.Context()
	pool := k.NewVolumePool(t, &testenv.VolumeOptions{Count: 1, Immediate: true})
	claims := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace)
	c := claim("data-0")
	c.Spec.StorageClassName = &pool.StorageClass
	if _, err := claims.Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// waitFor waits for the condition's status and returns it with how long
	// it took to appear.
	waitFor := func(status corev1.ConditionStatus) (corev1.PersistentVolumeClaimCondition, time.Duration) {
		t.Helper()
		start := time.Now()
		var got corev1.PersistentVolumeClaimCondition
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			c, err := claims.Get(ctx, "data-0", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range c.Status.Conditions {
				if cond.Type == unusedCondition && cond.Status == status {
					got = cond
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("claim data-0 never got Unused=%s: %v", status, err)
		}
		return got, time.Since(start)
	}
	first, took := waitFor(corev1.ConditionTrue)
	t.Logf("claim bound: Unused=True (%s) after %s", first.Reason, took.Round(time.Millisecond))

	pods := k.Client.CoreV1().Pods(k.Namespace)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "db", Image: "db"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}}},
		},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	used, took := waitFor(corev1.ConditionFalse)
	t.Logf("pod created: Unused=False (%s) after %s", used.Reason, took.Round(time.Millisecond))

	// Transition times have one-second precision.
	time.Sleep(1100 * time.Millisecond)
	if err := pods.Delete(ctx, "db-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	again, took := waitFor(corev1.ConditionTrue)
	t.Logf("pod deleted: Unused=True (%s) after %s, since %s", again.Reason, took.Round(time.Millisecond), again.LastTransitionTime.UTC())
	if !again.LastTransitionTime.After(used.LastTransitionTime.Time) {
		t.Errorf("Unused=True again at %s, not after Unused=False at %s: the transition time does not say since when the claim is unused",
			again.LastTransitionTime, used.LastTransitionTime)
	}
}
