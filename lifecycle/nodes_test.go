package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// The tests of this file run on fake nodes (testenv.StartNodes): pods are
// scheduled and Running, a deleted pod stays Terminating, its claim
// mounted, for its grace period, and a node can stop answering.

// nodesEnv is a namespace with nodes, a pool of volumes (claims bind when
// their pod is scheduled) and two managers on a fake clock: one that tracks
// unmounts by annotation, one by the claims' Unused condition.
type nodesEnv struct {
	t     *testing.T
	k     *testenv.Kubernetes
	nodes *testenv.Nodes
	pool  *testenv.VolumePool
	clk   *clocktesting.FakeClock
	ann   *lifecycle.Manager // unmounts by annotation
	cond  *lifecycle.Manager // unmounts by the Unused condition
}

func startNodesEnv(t *testing.T, nodes int) *nodesEnv {
	k := testenv.StartKubernetes(t)
	e := &nodesEnv{t: t, k: k, clk: clocktesting.NewFakeClock(time.Now())}
	e.nodes = k.StartNodes(t, &testenv.NodeOptions{Count: nodes})
	e.pool = k.NewVolumePool(t, &testenv.VolumeOptions{Count: 4})
	var err error
	if e.ann, err = lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(k.Client.CoreV1()), Clock: e.clk}); err != nil {
		t.Fatal(err)
	}
	if e.cond, err = lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(k.Client.CoreV1()), Clock: e.clk,
		Annotations: lifecycle.Annotations{UnusedCondition: true}}); err != nil {
		t.Fatal(err)
	}
	return e
}

const claimTTL = time.Hour

// podWithClaim creates the claim data-<pod>, tracked for the pod with
// claimTTL, and the pod (grace period grace, on node when not empty), and
// waits until the pod runs with its claim bound.
func (e *nodesEnv) podWithClaim(pod string, grace int64, node string) {
	e.t.Helper()
	ctx := e.t.Context()
	spec := claimSpec()
	spec.StorageClassName = &e.pool.StorageClass
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + pod, Annotations: e.ann.Annotations().Track(pod, claimTTL)}, Spec: spec}
	if _, err := e.k.Client.CoreV1().PersistentVolumeClaims(e.k.Namespace).Create(ctx, c, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod}, Spec: podSpec("data-" + pod)}
	p.Spec.TerminationGracePeriodSeconds = ptr.To(grace)
	if node != "" {
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	}
	if _, err := e.k.Client.CoreV1().Pods(e.k.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.waitPod(pod, "Running", func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodRunning })
	if got := e.claim("data-" + pod); got.Status.Phase != corev1.ClaimBound {
		e.t.Fatalf("claim data-%s of a running pod is %s, want Bound", pod, got.Status.Phase)
	}
}

func (e *nodesEnv) claim(name string) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	c, err := e.k.Client.CoreV1().PersistentVolumeClaims(e.k.Namespace).Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("claim %s: %v", name, err)
	}
	return c
}

// pod returns the pod, nil when it is gone.
func (e *nodesEnv) pod(name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.k.Client.CoreV1().Pods(e.k.Namespace).Get(e.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// waitPod polls the pod (nil once gone) until done.
func (e *nodesEnv) waitPod(name, what string, done func(*corev1.Pod) bool) *corev1.Pod {
	e.t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(e.t.Context(), 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := e.k.Client.CoreV1().Pods(e.k.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			last = nil
		case err != nil:
			return false, err
		default:
			last = p
		}
		return done(last), nil
	})
	if err != nil {
		e.t.Fatalf("pod %s not %s: %v (last seen: %s)", name, what, err, describePod(last))
	}
	return last
}

func describePod(p *corev1.Pod) string {
	if p == nil {
		return "gone"
	}
	return fmt.Sprintf("node %q, phase %s, conditions %v, deletionTimestamp %v", p.Spec.NodeName, p.Status.Phase, p.Status.Conditions, p.DeletionTimestamp)
}

// unusedCondition waits for the claim's Unused condition to have status and
// returns its transition time.
func (e *nodesEnv) unusedCondition(name string, status corev1.ConditionStatus) time.Time {
	e.t.Helper()
	var since time.Time
	err := wait.PollUntilContextTimeout(e.t.Context(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := e.k.Client.CoreV1().PersistentVolumeClaims(e.k.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == unused && cond.Status == status {
				since = cond.LastTransitionTime.Time
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.t.Fatalf("claim %s never got Unused=%s: %v", name, status, err)
	}
	return since
}

// staleMark writes last-unmounted-on on the claim, at the given instant, as
// a late pod-delete event of an earlier pod would have: the mark that a
// collector must not trust while a pod mounts the claim.
func (e *nodesEnv) staleMark(name string, at time.Time) {
	e.t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		e.ann.Annotations().LastUnmountedKey(): at.UTC().Format(time.RFC3339)}}})
	if _, err := e.k.Client.CoreV1().PersistentVolumeClaims(e.k.Namespace).Patch(e.t.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// collect runs a pass of m at the given instant and returns the claims it
// deleted.
func (e *nodesEnv) collect(m *lifecycle.Manager, at time.Time) []string {
	e.t.Helper()
	e.clk.SetTime(at)
	res, err := m.Collect(e.t.Context(), lifecycle.CollectOptions{Scope: lifecycle.Scope{Namespace: e.k.Namespace}})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range res.Deleted {
		out = append(out, d.Claim)
	}
	return out
}

// keeps fails the test unless the claim is there and not being deleted.
func (e *nodesEnv) keeps(name, when string) {
	e.t.Helper()
	if c := e.claim(name); c.DeletionTimestamp != nil {
		e.t.Fatalf("%s: claim %s is being deleted (since %s)", when, name, c.DeletionTimestamp)
	}
}

// A pod that is terminating still mounts its claim for its whole grace
// period: lifecycle neither marks the claim unmounted nor collects it,
// whatever its mark says, by annotation or by the Unused condition, until
// the pod is gone; the TTL then counts from the instant it went.
func TestTerminatingPodKeepsItsClaimUntilItIsGone(t *testing.T) {
	t.Parallel()
	e := startNodesEnv(t, 1)
	ctx := t.Context()
	pc := lifecycle.PodClaim{Namespace: e.k.Namespace, Pod: "db-0", Claim: "data-db-0"}
	// Long enough for the checks below to run while the pod terminates,
	// which the test verifies.
	const grace = 15
	e.podWithClaim("db-0", grace, "")
	e.unusedCondition("data-db-0", corev1.ConditionFalse)

	if err := e.k.Client.CoreV1().Pods(e.k.Namespace).Delete(ctx, "db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	terminating := e.pod("db-0")
	if terminating == nil || terminating.DeletionTimestamp == nil {
		t.Fatalf("pod right after its deletion: %s; want it Terminating for %d s", describePod(terminating), grace)
	}
	deadline := terminating.DeletionTimestamp.Time

	// The operator's pod-delete handler: the pod is not gone.
	if ok, err := e.ann.MarkUnmounted(ctx, pc); err != nil || ok {
		t.Errorf("MarkUnmounted while the pod terminates = %v, %v; want false (it still mounts the claim)", ok, err)
	}
	if v, ok := e.claim("data-db-0").Annotations[e.ann.Annotations().LastUnmountedKey()]; ok {
		t.Errorf("claim marked unmounted (%s) while its pod terminates", v)
	}
	// A stale mark, long expired: the terminating pod still keeps the claim.
	e.staleMark("data-db-0", e.clk.Now().Add(-2*claimTTL))
	if got := e.collect(e.ann, e.clk.Now().Add(10*claimTTL)); len(got) != 0 {
		t.Errorf("Collect while the pod terminates deleted %v", got)
	}
	e.keeps("data-db-0", "after Collect while the pod terminates")
	if _, ok := e.claim("data-db-0").Annotations[e.ann.Annotations().LastUnmountedKey()]; ok {
		t.Errorf("Collect left the stale mark on a claim that a terminating pod mounts")
	}
	// CheckReuse for the pod's next incarnation (an operator whose cache
	// missed the terminating pod) on the expired stale mark: it waits, and
	// deletes nothing.
	e.staleMark("data-db-0", e.clk.Now().Add(-2*claimTTL))
	if dec, err := e.ann.CheckReuse(ctx, pc, nil); err != nil || dec.Verdict != lifecycle.VerdictWait {
		t.Errorf("CheckReuse of an expired claim while its pod terminates = %+v, %v; want VerdictWait", dec, err)
	}
	e.keeps("data-db-0", "after CheckReuse while the pod terminates")
	// The Unused condition says the same: a terminating pod is not done.
	if got := e.collect(e.cond, e.clk.Now().Add(100*claimTTL)); len(got) != 0 {
		t.Errorf("Collect (Unused condition) while the pod terminates deleted %v", got)
	}
	e.keeps("data-db-0", "after Collect (Unused condition) while the pod terminates")
	// Every check above ran while the pod was terminating.
	if p := e.pod("db-0"); p == nil {
		t.Fatalf("the pod was gone before the checks ended (deadline %s): the machine is too slow for a %d s grace period", deadline, grace)
	}

	// The pod goes at its deletionTimestamp, not before.
	var lastSeen time.Time
	e.waitPod("db-0", "gone", func(p *corev1.Pod) bool {
		if p != nil {
			lastSeen = time.Now()
		}
		return p == nil
	})
	goneBy := time.Now()
	if lastSeen.Before(deadline.Add(-time.Second)) {
		t.Errorf("pod last seen %s, gone before its deletionTimestamp %s", lastSeen.Format(time.StampMilli), deadline.Format(time.StampMilli))
	}
	e.keeps("data-db-0", "once its pod is gone")

	// Now it is unmounted: by annotation from MarkUnmounted's instant...
	e.clk.SetTime(goneBy)
	if ok, err := e.ann.MarkUnmounted(ctx, pc); err != nil || !ok {
		t.Fatalf("MarkUnmounted once the pod is gone = %v, %v; want true", ok, err)
	}
	// ...and by condition from the instant the pod went (one-second
	// precision).
	since := e.unusedCondition("data-db-0", corev1.ConditionTrue)
	if since.Before(deadline.Add(-time.Second)) || since.After(goneBy.Add(time.Second)) {
		t.Errorf("Unused=True since %s; want when the pod went, between %s and %s", since, deadline, goneBy)
	}
	if got := e.collect(e.cond, since.Add(claimTTL-time.Second)); len(got) != 0 {
		t.Errorf("Collect (Unused condition) before the TTL since the pod went deleted %v", got)
	}
	if got := e.collect(e.ann, goneBy.Add(claimTTL-time.Second)); len(got) != 0 {
		t.Errorf("Collect before the TTL since the unmount deleted %v", got)
	}
	e.keeps("data-db-0", "before the TTL")
	if got := e.collect(e.ann, goneBy.Add(claimTTL+time.Second)); len(got) != 1 || got[0] != "data-db-0" {
		t.Errorf("Collect after the TTL since the unmount deleted %v, want data-db-0", got)
	}
}

// A node that stops answering leaves its pod in the API, Running and then,
// evicted, Terminating past its deletionTimestamp, for as long as it does
// not answer: the pod may still run and write. Through all of it lifecycle
// keeps the claim; once the node answers and the pod is gone, the claim is
// unmounted.
func TestNodeFailureNeverFreesAClaimWhilePodMayRun(t *testing.T) {
	t.Parallel()
	// Two nodes: when every node of a zone fails, the node-lifecycle
	// controller blames the network and evicts nothing.
	e := startNodesEnv(t, 2)
	ctx := t.Context()
	failing, healthy := e.nodes.Items[0], e.nodes.Items[1]
	pc := lifecycle.PodClaim{Namespace: e.k.Namespace, Pod: "db-0", Claim: "data-db-0"}
	e.podWithClaim("db-0", 1, failing.Name)
	e.unusedCondition("data-db-0", corev1.ConditionFalse)

	// check runs every decision lifecycle makes on the claim, with a stale
	// mark long expired, and fails the test if one lets the claim go.
	check := func(when string) {
		t.Helper()
		if ok, err := e.ann.MarkUnmounted(ctx, pc); err != nil || ok {
			t.Errorf("%s: MarkUnmounted = %v, %v; want false", when, ok, err)
		}
		e.staleMark("data-db-0", e.clk.Now().Add(-2*claimTTL))
		if got := e.collect(e.ann, e.clk.Now().Add(10*claimTTL)); len(got) != 0 {
			t.Errorf("%s: Collect deleted %v", when, got)
		}
		if got := e.collect(e.cond, e.clk.Now().Add(10*claimTTL)); len(got) != 0 {
			t.Errorf("%s: Collect (Unused condition) deleted %v", when, got)
		}
		e.unusedCondition("data-db-0", corev1.ConditionFalse)
		e.keeps("data-db-0", when)
	}

	if err := failing.Kubelet.Kill(); err != nil {
		t.Fatal(err)
	}
	e.waitPod("db-0", "marked not ready on its node that stopped answering", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionFalse
			}
		}
		return false
	})
	check("node not answering, pod not ready")
	evicted := e.waitPod("db-0", "evicted", func(p *corev1.Pod) bool { return p != nil && p.DeletionTimestamp != nil })
	check("pod evicted, its node not answering")

	// A pod deleted later on the healthy node is gone once its own, later,
	// deletionTimestamp passed: the evicted pod's has passed too.
	w := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "witness"}, Spec: podSpec("")}
	w.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
	w.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": healthy.Name}
	if _, err := e.k.Client.CoreV1().Pods(e.k.Namespace).Create(ctx, w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPod("witness", "Running", func(p *corev1.Pod) bool { return p != nil && p.Status.Phase == corev1.PodRunning })
	if err := e.k.Client.CoreV1().Pods(e.k.Namespace).Delete(ctx, "witness", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitPod("witness", "gone", func(p *corev1.Pod) bool { return p == nil })
	if p := e.pod("db-0"); p == nil || !p.DeletionTimestamp.Equal(evicted.DeletionTimestamp) {
		t.Fatalf("the evicted pod of the node that does not answer: %s; want it Terminating still, since %s", describePod(p), evicted.DeletionTimestamp)
	}
	check("past the evicted pod's deletionTimestamp, its node not answering")

	if err := failing.Kubelet.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitPod("db-0", "gone once its node answers", func(p *corev1.Pod) bool { return p == nil })
	if ok, err := e.ann.MarkUnmounted(ctx, pc); err != nil || !ok {
		t.Errorf("MarkUnmounted once the pod is gone = %v, %v; want true", ok, err)
	}
	e.unusedCondition("data-db-0", corev1.ConditionTrue)
}

// SyncSet on nodes, with whenScaled=Delete: a pod deleted in range is not
// replaced while it terminates (its claim untouched), then comes back with
// the same claim; on scale-down the condemned pod terminates for its grace
// period with its claim, which goes only once the pod is gone, as the
// StatefulSet controller's claims do (the claim's owner reference is the
// pod, and the garbage collector waits for it).
func TestSyncSetWaitsForTerminatingPods(t *testing.T) {
	t.Parallel()
	e := startNodesEnv(t, 1)
	ctx := t.Context()
	const grace = 8
	owner := claimSetOwner{c: e.k.Client, ns: e.k.Namespace, name: "db",
		specs: specs{class: &e.pool.StorageClass, grace: ptr.To[int64](grace)}}
	policy := lifecycle.Policy{WhenDeleted: lifecycle.ActionRetain, WhenScaled: lifecycle.ActionDelete}
	sync := func(replicas int) lifecycle.SetResult {
		t.Helper()
		if err := owner.write(ctx, replicas, policy); err != nil {
			t.Fatal(err)
		}
		o, err := owner.read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.ann.SyncSet(ctx, owner.claimSet(*o), nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	running := func(p *corev1.Pod) bool {
		return p != nil && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning
	}
	sync(2)
	e.waitPod("db-0", "Running", running)
	e.waitPod("db-1", "Running", running)
	claim0 := e.claim("data-db-0").UID

	// A pod deleted in range: not replaced, its claim untouched, while it
	// terminates.
	if err := e.k.Client.CoreV1().Pods(e.k.Namespace).Delete(ctx, "db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	old := e.pod("db-0")
	res := sync(2)
	if p := e.pod("db-0"); p == nil || p.UID != old.UID {
		t.Fatalf("SyncSet while db-0 terminates: pod %s (uid %v), want the terminating one (uid %s); actions %+v", describePod(p), p, old.UID, res.Actions)
	}
	if res.Ready != 1 {
		t.Errorf("SyncSet while db-0 terminates: Ready %d, want 1 (a terminating pod is not ready)", res.Ready)
	}
	e.keeps("data-db-0", "while db-0 terminates")
	e.waitPod("db-0", "gone", func(p *corev1.Pod) bool { return p == nil || p.UID != old.UID })
	sync(2)
	e.waitPod("db-0", "Running again", running)
	if got := e.claim("data-db-0").UID; got != claim0 {
		t.Errorf("db-0 came back with claim uid %s, want its own claim %s", got, claim0)
	}

	// Scale-down: the condemned pod terminates with its claim; the claim
	// goes after it.
	res = sync(1)
	condemned := e.pod("db-1")
	if condemned == nil || condemned.DeletionTimestamp == nil {
		t.Fatalf("SyncSet(1): pod db-1 %s, want it terminating; result %+v", describePod(condemned), res)
	}
	for range 3 {
		sync(1)
	}
	if p := e.pod("db-1"); p == nil {
		t.Fatal("db-1 was gone before the checks during its termination ended: the machine is too slow for the grace period")
	}
	e.keeps("data-db-1", "while the condemned pod terminates")
	e.waitPod("db-1", "gone", func(p *corev1.Pod) bool { return p == nil })
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.k.Client.CoreV1().PersistentVolumeClaims(e.k.Namespace).Get(ctx, "data-db-1", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("claim of the condemned pod not deleted after the pod went (whenScaled=Delete): %v", err)
	}
	e.keeps("data-db-0", "after the scale-down")
}
