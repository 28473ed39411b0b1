package lifecycle_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"
)

// hookClient wraps a real client to run code just before a claim is patched
// or deleted, the way controller-runtime's interceptor does: the request
// itself still goes to the real API server.
type hookClient struct {
	lifecycle.Client
	mu           sync.Mutex
	beforeDelete func(ctx context.Context, name string)
	beforePatch  func(ctx context.Context, name string)
	patches      int
	deletes      int
}

func (h *hookClient) DeleteClaim(ctx context.Context, namespace, name string, pre metav1.Preconditions) error {
	h.mu.Lock()
	h.deletes++
	hook := h.beforeDelete
	h.mu.Unlock()
	if hook != nil {
		hook(ctx, name)
	}
	return h.Client.DeleteClaim(ctx, namespace, name, pre)
}

func (h *hookClient) PatchClaim(ctx context.Context, namespace, name string, patch []byte) (*corev1.PersistentVolumeClaim, error) {
	h.mu.Lock()
	h.patches++
	hook := h.beforePatch
	h.mu.Unlock()
	if hook != nil {
		hook(ctx, name)
	}
	return h.Client.PatchClaim(ctx, namespace, name, patch)
}

func newClaim(name, app string, ann map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}, Annotations: ann}, Spec: claimSpec()}
}

func newPod(name, app, claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}}, Spec: podSpec(claim)}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func waitGone(t *testing.T, c kubernetes.Interface, ns, claim string) {
	t.Helper()
	if err := gone(c, ns, claim); err != nil {
		t.Fatal(err)
	}
}

func gone(c kubernetes.Interface, ns, claim string) error {
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), client(err)
	})
	if err != nil {
		return fmt.Errorf("claim %s not gone: %w", claim, err)
	}
	return nil
}

// The aerospike flow end to end, with aerospike-operator's annotation names
// and a fake clock: pod deleted → last-unmounted-on set; pod recreated within
// the TTL → annotation cleared and claim reused; pod deleted again, TTL runs
// out → claim collected; an expired claim is deleted, never reused.
func TestUnmountTTLFlow(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	claims, pods := env.Client.CoreV1().PersistentVolumeClaims(ns), env.Client.CoreV1().Pods(ns)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(env.Client.CoreV1()), Clock: clk,
		Annotations: lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix}}))
	ann := m.Annotations()
	scope := lifecycle.Scope{Namespace: ns, Selector: labels.SelectorFromSet(map[string]string{"app": "as"})}

	claim := must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, newClaim("data-as-0", "as", ann.Track("as-0", time.Hour)), metav1.CreateOptions{}))
	if claim.Annotations["aerospike.travelaudience.com/pvc-ttl"] != "1h" || claim.Annotations["aerospike.travelaudience.com/pod-name"] != "as-0" {
		t.Fatalf("tracking annotations = %v", claim.Annotations)
	}
	must[*corev1.Pod](t)(pods.Create(ctx, newPod("as-0", "as", claim.Name), metav1.CreateOptions{}))
	collect := func(dry bool) lifecycle.CollectResult {
		t.Helper()
		res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: scope, DryRun: dry})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := collect(false); len(res.Deleted) != 0 || !res.Next.IsZero() || res.Listed != 1 {
		t.Fatalf("mounted claim: %+v", res)
	}

	// Pod deleted: the claim is marked unmounted at the fake clock's now.
	unmountedAt := clk.Now()
	if err := pods.Delete(ctx, "as-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if unmounted, err := m.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-0", Claim: claim.Name}); err != nil || !unmounted {
		t.Fatalf("MarkUnmounted: unmounted %v, %v", unmounted, err)
	}
	got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, claim.Name, metav1.GetOptions{}))
	if v := got.Annotations["aerospike.travelaudience.com/last-unmounted-on"]; v != "2026-11-22T12:00:00Z" {
		t.Fatalf("last-unmounted-on = %q", v)
	}

	// 30 minutes later: nothing to delete, come back in 30 minutes.
	clk.Step(30 * time.Minute)
	res := collect(false)
	if len(res.Deleted) != 0 || res.RequeueAfter != 30*time.Minute || !res.Next.Equal(unmountedAt.Add(time.Hour)) {
		t.Fatalf("within TTL: deleted %v, requeue after %s, next %s", res.Deleted, res.RequeueAfter, res.Next)
	}

	// Pod recreated within the TTL: the claim is reused, the mark cleared.
	dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-0", Claim: claim.Name}, nil))
	if dec.Verdict != lifecycle.VerdictReuse {
		t.Fatalf("reuse within TTL: %v %s", dec.Verdict, dec.Reason)
	}
	got = must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, claim.Name, metav1.GetOptions{}))
	if _, ok := got.Annotations[ann.LastUnmountedKey()]; ok || got.UID != claim.UID {
		t.Fatalf("after reuse: uid %s (was %s), annotations %v", got.UID, claim.UID, got.Annotations)
	}
	must[*corev1.Pod](t)(pods.Create(ctx, newPod("as-0", "as", claim.Name), metav1.CreateOptions{}))
	clk.Step(2 * time.Hour)
	if res := collect(false); len(res.Deleted) != 0 {
		t.Fatalf("mounted again, 2h later: deleted %v", res.Deleted)
	}

	// Pod deleted again; the TTL runs out: the claim is collected.
	if err := pods.Delete(ctx, "as-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if unmounted, err := m.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-0", Claim: claim.Name}); err != nil || !unmounted {
		t.Fatalf("MarkUnmounted: unmounted %v, %v", unmounted, err)
	}
	clk.Step(59 * time.Minute)
	if res := collect(false); len(res.Deleted) != 0 || res.RequeueAfter != time.Minute {
		t.Fatalf("a minute before expiry: %+v", res)
	}
	clk.Step(time.Minute)
	dry := collect(true)
	if len(dry.Deleted) != 1 || dry.Deleted[0].Claim != claim.Name || dry.Deleted[0].UID != claim.UID || dry.Deleted[0].Reason == "" {
		t.Fatalf("dry run: %+v", dry.Deleted)
	}
	if got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, claim.Name, metav1.GetOptions{})); got.DeletionTimestamp != nil {
		t.Fatal("dry run deleted the claim")
	}
	res = collect(false)
	if len(res.Deleted) != 1 || res.Deleted[0].Claim != claim.Name || !res.Next.IsZero() {
		t.Fatalf("expired: %+v", res)
	}
	waitGone(t, env.Client, ns, claim.Name)

	// An expired claim is never reused: the check deletes it first.
	old := clk.Now().Add(-3 * time.Hour).Format(time.RFC3339)
	expired := newClaim("data-as-1", "as", map[string]string{ann.TTLKey(): "1h", ann.PodNameKey(): "as-1", ann.LastUnmountedKey(): old})
	expired = must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, expired, metav1.CreateOptions{}))
	dec = must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-1", Claim: expired.Name}, nil))
	if dec.Verdict != lifecycle.VerdictDeleteFirst {
		t.Fatalf("expired claim: %v", dec.Verdict)
	}
	waitGone(t, env.Client, ns, expired.Name)
	if dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-1", Claim: expired.Name}, nil)); dec.Verdict != lifecycle.VerdictCreate {
		t.Fatalf("after deletion: %v", dec.Verdict)
	}
}

// The collector deletes with UID and resourceVersion preconditions: a claim
// re-mounted, or deleted and recreated, between the decision and the delete
// is not deleted. A claim whose pod still mounts it is not deleted either.
func TestCollectorNeverDeletesChangedClaims(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	claims, pods := env.Client.CoreV1().PersistentVolumeClaims(ns), env.Client.CoreV1().Pods(ns)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	hooks := &hookClient{Client: lifecycle.ClientGo(env.Client.CoreV1())}
	// One delete worker: the hooks below run in order, and their writes
	// happen before Collect returns.
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: hooks, Clock: clk, DefaultTTL: time.Hour, DeleteWorkers: 1}))
	ann := m.Annotations()
	old := clk.Now().Add(-2 * time.Hour).Format(time.RFC3339)
	expiredAnn := func(pod string) map[string]string {
		return map[string]string{ann.PodNameKey(): pod, ann.LastUnmountedKey(): old}
	}
	for _, name := range []string{"remounted", "recreated", "mounted", "elsewhere", "gone"} {
		must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, newClaim(name, "db", expiredAnn("pod-"+name)), metav1.CreateOptions{}))
	}
	must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, newClaim("fresh", "db", map[string]string{ann.PodNameKey(): "pod-fresh",
		ann.LastUnmountedKey(): clk.Now().Add(-10 * time.Minute).Format(time.RFC3339)}), metav1.CreateOptions{}))
	must[*corev1.Pod](t)(pods.Create(ctx, newPod("pod-mounted", "db", "mounted"), metav1.CreateOptions{}))
	must[*corev1.Pod](t)(pods.Create(ctx, newPod("pod-elsewhere", "db", "other-claim"), metav1.CreateOptions{}))
	recreatedUID := types.UID("")
	hooks.beforeDelete = func(ctx context.Context, name string) {
		switch name {
		case "remounted": // a new pod mounted it: the mark is cleared
			patch := `{"metadata":{"annotations":{"` + ann.LastUnmountedKey() + `":null}}}`
			if _, err := claims.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Error(err)
			}
		case "recreated": // deleted and created again by someone else
			if err := claims.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
			if err := gone(env.Client, ns, name); err != nil {
				t.Error(err)
			}
			c, err := claims.Create(ctx, newClaim(name, "db", expiredAnn("pod-recreated")), metav1.CreateOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			recreatedUID = c.UID
		case "gone":
			if err := claims.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
			if err := gone(env.Client, ns, name); err != nil {
				t.Error(err)
			}
		}
	}
	res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: lifecycle.Scope{Namespace: ns}})
	if err != nil {
		t.Fatal(err)
	}
	deleted := map[string]bool{}
	for _, d := range res.Deleted {
		deleted[d.Claim] = true
	}
	skipped := map[string]lifecycle.SkipReason{}
	for _, s := range res.Skipped {
		skipped[s.Claim] = s.Reason
	}
	if len(deleted) != 1 || !deleted["elsewhere"] {
		t.Errorf("deleted %v, want only the claim whose pod mounts another claim", deleted)
	}
	for name, want := range map[string]lifecycle.SkipReason{"remounted": lifecycle.SkipChanged, "recreated": lifecycle.SkipChanged,
		"mounted": lifecycle.SkipMounted, "gone": lifecycle.SkipGone} {
		if skipped[name] != want {
			t.Errorf("claim %s skipped as %q, want %q", name, skipped[name], want)
		}
	}
	if want := clk.Now().Add(50 * time.Minute); !res.Next.Equal(want) {
		t.Errorf("next expiry %s, want %s (the fresh claim)", res.Next, want)
	}
	for _, name := range []string{"remounted", "recreated", "mounted", "fresh"} {
		c, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil || c.DeletionTimestamp != nil {
			t.Errorf("claim %s: %v, deleting=%v; want it kept", name, err, err == nil && c.DeletionTimestamp != nil)
		}
		if name == "recreated" && err == nil && c.UID != recreatedUID {
			t.Errorf("recreated claim has uid %s, want %s", c.UID, recreatedUID)
		}
	}
}

// A claim another object controls is never deleted or written to by the
// reuse check, expired or not.
func TestCheckReuseLeavesForeignClaims(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	claims := env.Client.CoreV1().PersistentVolumeClaims(ns)
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var events []string
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(env.Client.CoreV1()), Clock: clk,
		Annotations: lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix},
		Recorder: lifecycle.EventFunc(func(_ runtime.Object, typ, reason, msg string) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, typ+" "+reason+": "+msg)
		})}))
	ann := m.Annotations()

	// The claim's controller, a real object so the garbage collector leaves
	// the claim alone.
	cm := must[*corev1.ConfigMap](t)(env.Client.CoreV1().ConfigMaps(ns).Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nightly-backup"}}, metav1.CreateOptions{}))
	yes := true
	foreign := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: &yes}}
	owner := lifecycle.Ref{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "as", UID: "0b5a7e55-0000-4000-8000-000000000001"}

	old := clk.Now().Add(-3 * time.Hour).Format(time.RFC3339)
	expired := newClaim("data-as-0", "as", map[string]string{ann.TTLKey(): "1h", ann.PodNameKey(): "as-0", ann.LastUnmountedKey(): old})
	expired.OwnerReferences = foreign
	expired = must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, expired, metav1.CreateOptions{}))
	fresh := newClaim("data-as-1", "as", map[string]string{ann.TTLKey(): "1h", ann.PodNameKey(): "as-1", ann.LastUnmountedKey(): clk.Now().Format(time.RFC3339)})
	fresh.OwnerReferences = foreign
	fresh = must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, fresh, metav1.CreateOptions{}))

	dec := must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-0", Claim: expired.Name}, &lifecycle.ReuseOptions{Owner: &owner}))
	if dec.Verdict != lifecycle.VerdictWait {
		t.Errorf("expired foreign claim: %v (%s), want Wait", dec.Verdict, dec.Reason)
	}
	dec = must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-1", Claim: fresh.Name}, &lifecycle.ReuseOptions{Owner: &owner}))
	if dec.Verdict != lifecycle.VerdictReuse {
		t.Errorf("unexpired foreign claim: %v (%s), want ReuseClaim", dec.Verdict, dec.Reason)
	}
	for _, c := range []*corev1.PersistentVolumeClaim{expired, fresh} {
		got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, c.Name, metav1.GetOptions{}))
		if got.UID != c.UID || got.ResourceVersion != c.ResourceVersion || got.DeletionTimestamp != nil {
			t.Errorf("claim %s was written to or deleted: uid %s→%s, resourceVersion %s→%s, deletionTimestamp %v",
				c.Name, c.UID, got.UID, c.ResourceVersion, got.ResourceVersion, got.DeletionTimestamp)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 || !strings.Contains(events[0], "Warning ConflictingController") || !strings.Contains(events[0], "ConfigMap nightly-backup") {
		t.Errorf("events %q, want one ConflictingController warning naming the ConfigMap", events)
	}

	// Without an owner to compare with, the check cannot tell: the expired
	// claim is deleted first, as before.
	dec = must[lifecycle.ReuseDecision](t)(m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "as-0", Claim: expired.Name}, nil))
	if dec.Verdict != lifecycle.VerdictDeleteFirst {
		t.Errorf("expired claim, no owner given: %v, want DeleteFirst", dec.Verdict)
	}
}
