package lifecycle_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// unused is corev1.PersistentVolumeClaimUnused, spelled out: the library
// builds against k8s.io/api v0.35 too, which lacks it.
const unused corev1.PersistentVolumeClaimConditionType = "Unused"

func unusedClaim(name string, ann map[string]string, status corev1.ConditionStatus, since time.Time) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: ann}}
	if status != "" {
		c.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: unused, Status: status, LastTransitionTime: metav1.NewTime(since)}}
	}
	return c
}

// With UnusedCondition, Read takes "unmounted since" from the Unused
// condition of the claims it tracks, and from the annotation otherwise.
func TestReadUnusedCondition(t *testing.T) {
	a := lifecycle.Annotations{}
	opt := lifecycle.Annotations{UnusedCondition: true}
	t0 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	marked := map[string]string{a.PodNameKey(): "db-0", a.LastUnmountedKey(): "2026-11-19T00:00:00Z"}
	tracked := map[string]string{a.PodNameKey(): "db-0"}
	for _, tc := range []struct {
		name     string
		a        lifecycle.Annotations
		claim    *corev1.PersistentVolumeClaim
		since    time.Time
		fromCond bool
	}{
		{"option off: the annotation", a, unusedClaim("c", marked, corev1.ConditionTrue, t0), time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC), false},
		{"Unused=True: its transition time", opt, unusedClaim("c", marked, corev1.ConditionTrue, t0), t0, true},
		{"Unused=True, never marked: its transition time", opt, unusedClaim("c", tracked, corev1.ConditionTrue, t0), t0, true},
		{"Unused=False: mounted, a stale mark ignored", opt, unusedClaim("c", marked, corev1.ConditionFalse, t0), time.Time{}, true},
		{"Unused=Unknown: the annotation", opt, unusedClaim("c", marked, corev1.ConditionUnknown, t0), time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC), false},
		{"no condition (older cluster, claim not bound): the annotation", opt, unusedClaim("c", marked, "", t0), time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC), false},
		{"not tracked: never unmounted", opt, unusedClaim("c", map[string]string{"other": "x"}, corev1.ConditionTrue, t0), time.Time{}, false},
	} {
		u, err := tc.a.Read(tc.claim)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !u.Since.Equal(tc.since) || u.FromCondition != tc.fromCond {
			t.Errorf("%s: since %s (from condition %v), want %s (%v)", tc.name, u.Since, u.FromCondition, tc.since, tc.fromCond)
		}
	}
}

// Against the real control plane (1.37: the pvc-protection controller sets
// the condition on Bound claims): with UnusedCondition a claim's TTL runs
// from the condition's transition time, with no annotation written; a pod
// that names the claim stops it; its deletion starts it again, later; a
// claim not tracked is never collected; a claim without the condition is
// tracked by the annotation as before.
func TestUnusedConditionDrivesCollection(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := t.Context()
	claims := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace)
	pods := k.Client.CoreV1().Pods(k.Namespace)
	clk := clocktesting.NewFakeClock(time.Now())
	opt := lifecycle.Annotations{UnusedCondition: true}
	m, err := lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(k.Client.CoreV1()), Clock: clk, Annotations: opt})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(k.Client.CoreV1()), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	// The persistentvolume-binder binds each claim of the pool's class to
	// one of its volumes, at once (no pod needed).
	pool := k.NewVolumePool(t, &testenv.VolumeOptions{Count: 2, Immediate: true})
	bound := func(name string, ann map[string]string) {
		t.Helper()
		spec := claimSpec()
		spec.StorageClassName = &pool.StorageClass
		if _, err := claims.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(name string, status corev1.ConditionStatus, after time.Time) time.Time {
		t.Helper()
		var since time.Time
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			c, err := claims.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range c.Status.Conditions {
				if cond.Type == unused && cond.Status == status && cond.LastTransitionTime.After(after) {
					since = cond.LastTransitionTime.Time
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("claim %s never got Unused=%s after %s: %v", name, status, after, err)
		}
		return since
	}
	collect := func(m *lifecycle.Manager, at time.Time, dryRun bool) lifecycle.CollectResult {
		t.Helper()
		clk.SetTime(at)
		res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: lifecycle.Scope{Namespace: k.Namespace}, DryRun: dryRun})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	deleted := func(res lifecycle.CollectResult) []string {
		var out []string
		for _, d := range res.Deleted {
			out = append(out, d.Claim)
		}
		return out
	}

	const ttl = time.Hour
	bound("data-db-0", m.Annotations().Track("db-0", ttl))
	bound("scratch", nil) // not tracked
	bornUnused := waitFor("data-db-0", corev1.ConditionTrue, time.Time{})
	waitFor("scratch", corev1.ConditionTrue, time.Time{})

	// Never mounted: unused since binding, so its TTL runs from then.
	if res := collect(m, bornUnused.Add(ttl-time.Minute), true); len(res.Deleted) != 0 || !res.Next.Equal(bornUnused.Add(ttl)) {
		t.Errorf("before the TTL: would delete %v, next %s; want none, next %s", deleted(res), res.Next, bornUnused.Add(ttl))
	}
	res := collect(m, bornUnused.Add(ttl+time.Second), true)
	if got := deleted(res); len(got) != 1 || got[0] != "data-db-0" || !res.Deleted[0].UnmountedSince.Equal(bornUnused) {
		t.Errorf("after the TTL: would delete %v (%+v); want data-db-0 only, unmounted since %s (scratch is not tracked)", got, res.Deleted, bornUnused)
	}
	if res := collect(plain, bornUnused.Add(100*ttl), true); len(res.Deleted) != 0 {
		t.Errorf("without UnusedCondition: would delete %v; want none (no claim is marked)", deleted(res))
	}

	// A pod names the claim: Unused=False, nothing expires.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0"}, Spec: podSpec("data-db-0")}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	used := waitFor("data-db-0", corev1.ConditionFalse, time.Time{})
	if res := collect(m, bornUnused.Add(100*ttl), true); len(res.Deleted) != 0 {
		t.Errorf("mounted: would delete %v", deleted(res))
	}

	// The pod goes: Unused=True again, since a later instant (transition
	// times have one-second precision), and MarkUnmounted writes nothing.
	time.Sleep(1100 * time.Millisecond)
	if err := pods.Delete(ctx, "db-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	unmounted := waitFor("data-db-0", corev1.ConditionTrue, used)
	if ok, err := m.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: k.Namespace, Pod: "db-0", Claim: "data-db-0"}); err != nil || !ok {
		t.Errorf("MarkUnmounted = %v, %v; want true", ok, err)
	}
	c, err := claims.Get(ctx, "data-db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Annotations[m.Annotations().LastUnmountedKey()]; ok {
		t.Errorf("MarkUnmounted wrote %s = %s on a claim whose Unused condition applies", m.Annotations().LastUnmountedKey(), v)
	}
	if res := collect(m, unmounted.Add(ttl-time.Second), false); len(res.Deleted) != 0 {
		t.Errorf("an hour after binding but not after the unmount: deleted %v", deleted(res))
	}
	if got := deleted(collect(m, unmounted.Add(ttl+time.Second), false)); len(got) != 1 || got[0] != "data-db-0" {
		t.Errorf("after the TTL since the unmount: deleted %v, want data-db-0", got)
	}
	if c, err := claims.Get(ctx, "data-db-0", metav1.GetOptions{}); err == nil && c.DeletionTimestamp == nil {
		t.Error("data-db-0 still there, not being deleted")
	}

	// A tracked claim without the condition (not bound here; an older
	// cluster alike) is marked by the annotation as without the option.
	if _, err := claims.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-db-1",
		Annotations: m.Annotations().Track("db-1", ttl)}, Spec: claimSpec()}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: k.Namespace, Pod: "db-1", Claim: "data-db-1"}); err != nil || !ok {
		t.Errorf("MarkUnmounted of a claim without the condition = %v, %v; want true", ok, err)
	}
	if c, err := claims.Get(ctx, "data-db-1", metav1.GetOptions{}); err != nil || c.Annotations[m.Annotations().LastUnmountedKey()] == "" {
		t.Errorf("claim without the condition not marked: %v %v", c.Annotations, err)
	}
}
