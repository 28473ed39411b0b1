package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"
)

// Regression tests for the deletion-safety review: each failed on 85ff259.

// Pod as-0 is deleted and recreated at once, and the pod-delete work item is
// handled only after the new pod mounts the claim (a busy worker, a late
// DeletedFinalStateUnknown). The late mark must not be written: otherwise
// the next restart after the TTL deletes the claim of a workload that was
// running a second before.
func TestLateUnmountMarkOnRemountedClaimIsNotWrittenClaimKept(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	claims, pods := env.Client.CoreV1().PersistentVolumeClaims(ns), env.Client.CoreV1().Pods(ns)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(env.Client.CoreV1()), Clock: clk,
		Annotations: lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix}}))
	ann := m.Annotations()

	claim := must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, newClaim("data-as-0", "as", ann.Track("as-0", time.Hour)), metav1.CreateOptions{}))
	must[*corev1.Pod](t)(pods.Create(ctx, newPod("as-0", "as", claim.Name), metav1.CreateOptions{}))

	// Restart: the pod is deleted and recreated before the delete event is
	// handled.
	if err := pods.Delete(ctx, "as-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-0", Claim: claim.Name}, nil)); dec.Verdict != lifecycle.VerdictReuse {
		t.Fatalf("reuse at restart: %v %s", dec.Verdict, dec.Reason)
	}
	must[*corev1.Pod](t)(pods.Create(ctx, newPod("as-0", "as", claim.Name), metav1.CreateOptions{}))

	// The late work item.
	if unmounted, err := m.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-0", Claim: claim.Name}); err != nil || unmounted {
		t.Fatalf("late MarkUnmounted: unmounted %v, %v; want false: as-0 mounts the claim again", unmounted, err)
	}
	got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, claim.Name, metav1.GetOptions{}))
	if v, ok := got.Annotations[ann.LastUnmountedKey()]; ok {
		t.Errorf("late mark written on a mounted claim: %s = %q", ann.LastUnmountedKey(), v)
	}

	// Two hours later, the next ordinary restart.
	clk.Step(2 * time.Hour)
	if err := pods.Delete(ctx, "as-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-0", Claim: claim.Name}, nil))
	if dec.Verdict != lifecycle.VerdictReuse {
		t.Errorf("restart 2h later: %v (%s), want Reuse: the claim was mounted all along", dec.Verdict, dec.Reason)
	}
	got = must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, claim.Name, metav1.GetOptions{}))
	if got.UID != claim.UID || got.DeletionTimestamp != nil {
		t.Errorf("claim uid %s (was %s), deletionTimestamp %v: the running workload's claim was deleted", got.UID, claim.UID, got.DeletionTimestamp)
	}
}

// A mark found on a mounted claim is removed and the claim kept, whichever
// pod mounts it: the collector's mount check covers every pod of the
// namespace, not only the one named by pod-name.
func TestMarkOnMountedClaimIsClearedWhicheverPodMountsIt(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	claims, pods := env.Client.CoreV1().PersistentVolumeClaims(ns), env.Client.CoreV1().Pods(ns)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(env.Client.CoreV1()), Clock: clk, DefaultTTL: time.Hour}))
	ann := m.Annotations()
	expired := clk.Now().Add(-2 * time.Hour).Format(time.RFC3339)
	recent := clk.Now().Add(-time.Minute).Format(time.RFC3339)

	// "no-pod-name" has no pod-name annotation (MarkUnmounted(…, "")
	// allows it); "other-pod" names as-0, which is gone, but a restore job
	// mounts it; "recent" is within its TTL and mounted by its own pod.
	for name, a := range map[string]map[string]string{
		"no-pod-name": {ann.LastUnmountedKey(): expired},
		"other-pod":   {ann.PodNameKey(): "as-0", ann.LastUnmountedKey(): expired},
		"recent":      {ann.PodNameKey(): "as-2", ann.LastUnmountedKey(): recent},
		"unmounted":   {ann.PodNameKey(): "as-3", ann.LastUnmountedKey(): expired},
	} {
		must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, newClaim(name, "as", a), metav1.CreateOptions{}))
	}
	must[*corev1.Pod](t)(pods.Create(ctx, newPod("worker", "other", "no-pod-name"), metav1.CreateOptions{}))
	must[*corev1.Pod](t)(pods.Create(ctx, newPod("restore-job", "other", "other-pod"), metav1.CreateOptions{}))
	must[*corev1.Pod](t)(pods.Create(ctx, newPod("as-2", "as", "recent"), metav1.CreateOptions{}))

	dry, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: lifecycle.Scope{Namespace: ns}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dry.Deleted) != 1 || dry.Deleted[0].Claim != "unmounted" {
		t.Errorf("dry run would delete %+v, want only the unmounted claim", dry.Deleted)
	}
	res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: lifecycle.Scope{Namespace: ns}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Deleted) != 1 || res.Deleted[0].Claim != "unmounted" {
		t.Errorf("deleted %+v, want only the unmounted claim", res.Deleted)
	}
	mounted := map[string]string{}
	for _, s := range res.Skipped {
		if s.Reason == lifecycle.SkipMounted {
			mounted[s.Claim] = s.Detail
		}
	}
	for name, pod := range map[string]string{"no-pod-name": "worker", "other-pod": "restore-job", "recent": "as-2"} {
		if !strings.Contains(mounted[name], "pod "+pod+" mounts it") {
			t.Errorf("claim %s: skip detail %q, want it reported as mounted by %s", name, mounted[name], pod)
		}
		got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, name, metav1.GetOptions{}))
		if got.DeletionTimestamp != nil {
			t.Errorf("mounted claim %s was deleted", name)
		}
		if v, ok := got.Annotations[ann.LastUnmountedKey()]; ok {
			t.Errorf("mounted claim %s still carries %s = %q", name, ann.LastUnmountedKey(), v)
		}
	}
	if !res.Next.IsZero() {
		t.Errorf("next expiry %s, want none: every claim left is mounted", res.Next)
	}
}

// A pod cache that has not yet seen a new pod does not get its claim
// deleted: the claims about to be deleted are checked against a fresh list
// from the API server.
func TestClaimMountedByPodMissingFromCacheIsKept(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	claims := env.Client.CoreV1().PersistentVolumeClaims(ns)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(env.Client.CoreV1()), Clock: clk, DefaultTTL: time.Hour}))
	ann := m.Annotations()
	expired := map[string]string{ann.PodNameKey(): "db-0", ann.LastUnmountedKey(): clk.Now().Add(-2 * time.Hour).Format(time.RFC3339)}
	claim := must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, newClaim("data-db-0", "db", expired), metav1.CreateOptions{}))
	// The pod is created after the cache's last list: the cache is empty.
	must[*corev1.Pod](t)(env.Client.CoreV1().Pods(ns).Create(ctx, newPod("db-0", "db", claim.Name), metav1.CreateOptions{}))
	scope := lifecycle.Scope{Namespace: ns, Pods: snapshotLister[*corev1.Pod]{}}

	for _, dry := range []bool{true, false} {
		res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: scope, DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Deleted) != 0 || len(res.Skipped) != 1 || res.Skipped[0].Reason != lifecycle.SkipMounted {
			t.Errorf("dry run %v: deleted %+v, skipped %+v; want the claim kept as mounted", dry, res.Deleted, res.Skipped)
		}
	}
	got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, claim.Name, metav1.GetOptions{}))
	if got.UID != claim.UID || got.DeletionTimestamp != nil {
		t.Fatalf("claim mounted by db-0 was deleted")
	}
	if _, ok := got.Annotations[ann.LastUnmountedKey()]; ok {
		t.Errorf("mounted claim still carries its out-of-date mark")
	}
}

// An owner deleted with background propagation and recreated under its name
// before the garbage collector processed its claims: the claims still carry
// a controller reference to the earlier UID, and the garbage collector will
// delete them. CheckReuse must not hand such a claim to a new pod.
func TestReuseWaitsForClaimOfEarlierOwnerOfSameName(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	claims, cms := env.Client.CoreV1().PersistentVolumeClaims(ns), env.Client.CoreV1().ConfigMaps(ns)
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(env.Client.CoreV1())}))
	yes := true

	// The garbage collector may win the race to the claim; then the check
	// answered on a claim that is gone or going, which proves nothing: try
	// again.
	for attempt := 1; ; attempt++ {
		name := fmt.Sprintf("db%d", attempt)
		earlier := must[*corev1.ConfigMap](t)(cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))
		c := newClaim("data-"+name+"-0", "db", nil)
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: earlier.UID,
			Controller: &yes, BlockOwnerDeletion: &yes}}
		claim := must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, c, metav1.CreateOptions{}))
		background := metav1.DeletePropagationBackground
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			t.Fatal(err)
		}
		later := must[*corev1.ConfigMap](t)(cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))
		owner := lifecycle.Ref{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: later.UID}

		dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: name + "-0", Claim: claim.Name}, &lifecycle.ReuseOptions{Owner: &owner}))
		if (dec.Verdict == lifecycle.VerdictCreate || strings.Contains(dec.Reason, "is being deleted")) && attempt < 30 {
			t.Logf("attempt %d: the garbage collector reached the claim first (%v: %s); again", attempt, dec.Verdict, dec.Reason)
			continue
		}
		if dec.Verdict != lifecycle.VerdictWait || !strings.Contains(dec.Reason, string(earlier.UID)) {
			t.Fatalf("claim of the earlier owner: %v (%s), want Wait naming uid %s", dec.Verdict, dec.Reason, earlier.UID)
		}
		// Reusing it would have lost it: the garbage collector deletes it.
		waitGone(t, env.Client, ns, claim.Name)
		if dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: name + "-0", Claim: claim.Name}, &lifecycle.ReuseOptions{Owner: &owner})); dec.Verdict != lifecycle.VerdictCreate {
			t.Errorf("after the garbage collector: %v, want Create", dec.Verdict)
		}
		return
	}
}

// A scope must name its namespace: every delete goes to it. Nothing is sent.
func TestCollectRejectsScopeWithoutNamespace(t *testing.T) {
	t.Parallel()
	// Nothing listens there: a request would fail with another error.
	cs := kubernetes.NewForConfigOrDie(&rest.Config{Host: "http://127.0.0.1:1"})
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(cs.CoreV1())}))
	_, err := m.Collect(context.Background(), lifecycle.CollectOptions{})
	if !errors.Is(err, lifecycle.ErrInvalidInput) || !strings.Contains(err.Error(), `Scope.Namespace = ""`) {
		t.Errorf("Collect without a namespace: %v, want ErrInvalidInput naming Scope.Namespace", err)
	}
	_, err = m.SyncOwner(context.Background(), lifecycle.Scope{}, lifecycle.Ref{Kind: "X", Name: "x", UID: "u"}, lifecycle.Policy{}, nil, nil)
	if !errors.Is(err, lifecycle.ErrInvalidInput) {
		t.Errorf("SyncOwner without a namespace: %v, want ErrInvalidInput", err)
	}
}

// Cluster-wide caches serve objects of every namespace: pods are matched to
// claims by namespace and name, and claims of other namespaces are left
// alone.
func TestClusterWideCachesKeyByNamespace(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	other := testenv.StartKubernetes(t)
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(env.Client.CoreV1()), Clock: clk, DefaultTTL: time.Hour}))
	ann := m.Annotations()
	expired := map[string]string{ann.PodNameKey(): "db-0", ann.LastUnmountedKey(): clk.Now().Add(-2 * time.Hour).Format(time.RFC3339)}

	var claims snapshotLister[*corev1.PersistentVolumeClaim]
	var pods snapshotLister[*corev1.Pod]
	uids := map[string]types.UID{}
	// In our namespace db-0 mounts data-db-0; in the other one a pod of the
	// same name mounts something else, and its data-db-0 is unmounted.
	for _, x := range []struct{ ns, mounts string }{{env.Namespace, "data-db-0"}, {other.Namespace, "scratch"}} {
		c := must[*corev1.PersistentVolumeClaim](t)(env.Client.CoreV1().PersistentVolumeClaims(x.ns).Create(ctx, newClaim("data-db-0", "db", expired), metav1.CreateOptions{}))
		p := must[*corev1.Pod](t)(env.Client.CoreV1().Pods(x.ns).Create(ctx, newPod("db-0", "db", x.mounts), metav1.CreateOptions{}))
		claims.items = append(claims.items, c)
		pods.items = append(pods.items, p)
		uids[x.ns] = c.UID
	}
	res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: lifecycle.Scope{Namespace: env.Namespace, Claims: claims, Pods: pods}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Listed != 1 || len(res.Deleted) != 0 {
		t.Errorf("listed %d, deleted %+v; want our one claim listed and kept", res.Listed, res.Deleted)
	}
	for ns, uid := range uids {
		got := must[*corev1.PersistentVolumeClaim](t)(env.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-0", metav1.GetOptions{}))
		if got.UID != uid || got.DeletionTimestamp != nil {
			t.Errorf("claim %s/data-db-0 was deleted", ns)
		}
	}
}

// CheckReuse's dry run decides as the real check and writes nothing: an
// expired claim is answered DeleteFirst and stays, a reusable claim keeps
// its mark, and no event is recorded.
func TestCheckReuseDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	claims := env.Client.CoreV1().PersistentVolumeClaims(ns)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	var events atomic.Int32
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(env.Client.CoreV1()), Clock: clk,
		Recorder: lifecycle.EventFunc(func(runtime.Object, string, string, string) { events.Add(1) })}))
	ann := m.Annotations()
	owner := lifecycle.Ref{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "as", UID: "0b5a7e55-0000-4000-8000-000000000002"}
	expired := must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, newClaim("data-as-0", "as", map[string]string{ann.TTLKey(): "1h",
		ann.PodNameKey(): "as-0", ann.LastUnmountedKey(): clk.Now().Add(-3 * time.Hour).Format(time.RFC3339)}), metav1.CreateOptions{}))
	fresh := must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, newClaim("data-as-1", "as", map[string]string{ann.TTLKey(): "1h",
		ann.PodNameKey(): "as-1", ann.LastUnmountedKey(): clk.Now().Format(time.RFC3339)}), metav1.CreateOptions{}))
	dry := &lifecycle.ReuseOptions{Owner: &owner, DryRun: true}

	if dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-0", Claim: expired.Name}, dry)); dec.Verdict != lifecycle.VerdictDeleteFirst {
		t.Errorf("expired claim, dry run: %v, want DeleteFirst", dec.Verdict)
	}
	if dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-1", Claim: fresh.Name}, dry)); dec.Verdict != lifecycle.VerdictReuse {
		t.Errorf("fresh claim, dry run: %v, want Reuse", dec.Verdict)
	}
	for _, c := range []*corev1.PersistentVolumeClaim{expired, fresh} {
		got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, c.Name, metav1.GetOptions{}))
		if got.ResourceVersion != c.ResourceVersion || got.DeletionTimestamp != nil {
			t.Errorf("dry run wrote claim %s: resourceVersion %s→%s, deletionTimestamp %v", c.Name, c.ResourceVersion, got.ResourceVersion, got.DeletionTimestamp)
		}
	}
	if n := events.Load(); n != 0 {
		t.Errorf("dry run recorded %d events", n)
	}
	// The same check for real deletes the expired claim.
	if dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-0", Claim: expired.Name}, &lifecycle.ReuseOptions{Owner: &owner})); dec.Verdict != lifecycle.VerdictDeleteFirst {
		t.Errorf("expired claim: %v, want DeleteFirst", dec.Verdict)
	}
	waitGone(t, env.Client, ns, expired.Name)
}
