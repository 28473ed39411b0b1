package lifecycle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// Regression tests for the second deletion-safety review.

// A claim was marked unmounted long ago; since then a pod that is not the
// operator's (a debug pod, inspect-data) mounts it, created without
// CheckReuse, and no Collect pass has run yet. The operator's next
// CheckReuse for db-0 must not delete the claim on the strength of the stale
// mark: it decides on a fresh pod list, removes the mark and answers Wait.
// On the code before the shared rule, CheckReuse answered DeleteFirst and
// the claim was deleted while inspect-data mounted it.
func TestCheckReuseKeepsClaimAForeignPodMounts(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	claims, pods := env.Client.CoreV1().PersistentVolumeClaims(ns), env.Client.CoreV1().Pods(ns)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(env.Client.CoreV1()), Clock: clk}))
	ann := m.Annotations()

	a := ann.Track("db-0", time.Hour)
	a[ann.LastUnmountedKey()] = clk.Now().Add(-48 * time.Hour).Format(time.RFC3339)
	claim := must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, newClaim("data-db-0", "db", a), metav1.CreateOptions{}))
	must[*corev1.Pod](t)(pods.Create(ctx, newPod("inspect-data", "debug", claim.Name), metav1.CreateOptions{}))

	dry := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "db-0", Claim: claim.Name}, &lifecycle.ReuseOptions{DryRun: true}))
	if dry.Verdict != lifecycle.VerdictWait || !strings.Contains(dry.Reason, "inspect-data") {
		t.Errorf("dry run: %v (%s), want Wait naming inspect-data", dry.Verdict, dry.Reason)
	}
	if got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, claim.Name, metav1.GetOptions{})); got.Annotations[ann.LastUnmountedKey()] == "" {
		t.Errorf("dry run removed the mark")
	}

	dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "db-0", Claim: claim.Name}, nil))
	if dec.Verdict != lifecycle.VerdictWait {
		t.Errorf("CheckReuse: %v (%s), want Wait: pod inspect-data mounts the claim", dec.Verdict, dec.Reason)
	}
	got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, claim.Name, metav1.GetOptions{}))
	if got.UID != claim.UID || got.DeletionTimestamp != nil {
		t.Fatalf("claim %s deleted while pod inspect-data mounts it (uid %s, was %s; deletionTimestamp %v)", claim.Name, got.UID, claim.UID, got.DeletionTimestamp)
	}
	if v, ok := got.Annotations[ann.LastUnmountedKey()]; ok {
		t.Errorf("stale mark kept on a mounted claim: %s = %q", ann.LastUnmountedKey(), v)
	}

	// Collect on the same state agrees: nothing to delete.
	res := must[lifecycle.CollectResult](t)(m.Collect(ctx, lifecycle.CollectOptions{Scope: lifecycle.Scope{Namespace: ns}}))
	if len(res.Deleted) != 0 {
		t.Errorf("Collect deleted %+v", res.Deleted)
	}

	// Once the debug pod is gone, the claim is reused, not deleted: its
	// mark was removed, so the earlier unmount no longer counts.
	if err := pods.Delete(ctx, "inspect-data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dec = must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "db-0", Claim: claim.Name}, nil))
	if dec.Verdict != lifecycle.VerdictReuse {
		t.Errorf("after the debug pod: %v (%s), want Reuse", dec.Verdict, dec.Reason)
	}
}

// Every call that names a pod and a claim takes them in one PodClaim, and
// refuses one with a missing name, naming the field.
func TestPodClaimIsValidated(t *testing.T) {
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(nil)}))
	ctx := context.Background()
	for _, tc := range []struct {
		pc    lifecycle.PodClaim
		field string
	}{
		{lifecycle.PodClaim{Pod: "db-0", Claim: "data-db-0"}, "PodClaim.Namespace"},
		{lifecycle.PodClaim{Namespace: "ns", Pod: "db-0"}, "PodClaim.Claim"},
		{lifecycle.PodClaim{Namespace: "ns", Claim: "data-db-0"}, "PodClaim.Pod"},
	} {
		_, err := m.CheckReuse(ctx, tc.pc, nil)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("CheckReuse(%+v): %v, want an error naming %s", tc.pc, err, tc.field)
		}
	}
	_, err := m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: "ns", Pod: "db-0", Claim: "data-db-0"}, &lifecycle.ReuseOptions{OwnerLabel: "set"})
	if err == nil || !strings.Contains(err.Error(), "ReuseOptions.OwnerLabel") {
		t.Errorf("OwnerLabel without Owner: %v, want an error naming ReuseOptions.OwnerLabel", err)
	}
	for _, pc := range []lifecycle.PodClaim{{Claim: "c"}, {Namespace: "ns"}} {
		if _, err := m.MarkUnmounted(ctx, pc); err == nil {
			t.Errorf("MarkUnmounted(%+v): no error", pc)
		}
	}
}

// SyncOwner's dry run reports the plan it would write and writes nothing,
// through the same read as the real pass; the real pass then writes it.
func TestSyncOwnerDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	claims := env.Client.CoreV1().PersistentVolumeClaims(env.Namespace)
	owner := createOwner(t, env, "db")
	created := must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, newClaim("data-db-0", "db", nil), metav1.CreateOptions{}))
	hooks := &hookClient{Client: lifecycle.ClientGo(env.Client.CoreV1())}
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: hooks}))
	policy := must[lifecycle.Policy](t)(lifecycle.DeleteOnScaledownAndOwnerDeletion.Policy())
	scope := lifecycle.Scope{Namespace: env.Namespace}
	members := []lifecycle.Member{{Claims: []string{"data-db-0", "data-db-missing"}}}

	dry := must[[]lifecycle.ClaimSync](t)(m.SyncOwner(ctx, scope, owner, policy, members, &lifecycle.SyncOptions{DryRun: true}))
	if len(dry) != 2 || !dry[0].Plan.Changed || len(dry[0].Plan.OwnerReferences) != 1 || dry[0].Plan.OwnerReferences[0].UID != owner.UID || !dry[1].Missing {
		t.Fatalf("dry run: %+v, want data-db-0 to change to the owner's reference and data-db-missing missing", dry)
	}
	got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, "data-db-0", metav1.GetOptions{}))
	if hooks.patches != 0 || got.ResourceVersion != created.ResourceVersion || len(got.OwnerReferences) != 0 {
		t.Errorf("dry run wrote: %d patches, resourceVersion %s -> %s, owners %+v", hooks.patches, created.ResourceVersion, got.ResourceVersion, got.OwnerReferences)
	}

	real := must[[]lifecycle.ClaimSync](t)(m.SyncOwner(ctx, scope, owner, policy, members, nil))
	got = must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, "data-db-0", metav1.GetOptions{}))
	if !real[0].Plan.Changed || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != owner.UID {
		t.Errorf("real pass: %+v, claim owners %+v; want the reference the dry run reported", real[0], got.OwnerReferences)
	}
}

// Claim names built as <template>-<owner>-<ordinal> collide: template
// data-db of set x and template data of set db-x both name data-db-x-0. With
// the owner label, the other owner's claim is neither reused nor deleted,
// even when its mark has expired.
func TestCheckReuseLeavesAnotherOwnersClaimOfTheSameName(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	claims := env.Client.CoreV1().PersistentVolumeClaims(ns)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(env.Client.CoreV1()), Clock: clk}))
	ann := m.Annotations()
	a := ann.Track("x-0", time.Hour)
	a[ann.LastUnmountedKey()] = clk.Now().Add(-48 * time.Hour).Format(time.RFC3339)
	theirs := newClaim("data-db-x-0", "x", a)
	theirs.Labels = map[string]string{"set": "x"}
	theirs = must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, theirs, metav1.CreateOptions{}))

	owner := &lifecycle.Ref{APIVersion: "example.io/v1", Kind: "ReplicatedSet", Name: "db-x", UID: "uid-db-x"}
	for _, dryRun := range []bool{true, false} {
		dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "db-x-0", Claim: "data-db-x-0"},
			&lifecycle.ReuseOptions{Owner: owner, OwnerLabel: "set", DryRun: dryRun}))
		if dec.Verdict != lifecycle.VerdictWait || !strings.Contains(dec.Reason, "another owner") {
			t.Errorf("dry run %v: %v (%s), want Wait: the claim is set x's", dryRun, dec.Verdict, dec.Reason)
		}
	}
	got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, theirs.Name, metav1.GetOptions{}))
	if got.ResourceVersion != theirs.ResourceVersion || got.DeletionTimestamp != nil {
		t.Errorf("set x's claim was written or deleted: resourceVersion %s -> %s, deletionTimestamp %v", theirs.ResourceVersion, got.ResourceVersion, got.DeletionTimestamp)
	}
	// Set x itself, with its selector, finds its claim expired as before.
	dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "x-0", Claim: "data-db-x-0"},
		&lifecycle.ReuseOptions{Owner: &lifecycle.Ref{APIVersion: "example.io/v1", Kind: "ReplicatedSet", Name: "x", UID: "uid-x"}, OwnerLabel: "set", DryRun: true}))
	if dec.Verdict != lifecycle.VerdictDeleteFirst {
		t.Errorf("set x: %v (%s), want DeleteFirst", dec.Verdict, dec.Reason)
	}
}
