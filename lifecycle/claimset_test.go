package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// ---- a custom owner driven by lifecycle's claim set ----

// claimSetOwner stands for a custom resource with spec.replicas and a
// retention policy: a ConfigMap whose data holds them (the garbage
// collector treats every kind alike), read from the API server on every
// step, as a reconciler reads its object.
type claimSetOwner struct {
	specs
	c    kubernetes.Interface
	ns   string
	name string
}

func (o claimSetOwner) write(ctx context.Context, replicas int, p lifecycle.Policy) error {
	data := map[string]string{"replicas": strconv.Itoa(replicas), "whenDeleted": string(p.WhenDeleted), "whenScaled": string(p.WhenScaled)}
	cms := o.c.CoreV1().ConfigMaps(o.ns)
	cm, err := cms.Get(ctx, o.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: o.name}, Data: data}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	cm.Data = data
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return err
}

// read returns the owner as the API server has it; nil when it is gone.
func (o claimSetOwner) read(ctx context.Context) (*lifecycle.Owner, error) {
	cm, err := o.c.CoreV1().ConfigMaps(o.ns).Get(ctx, o.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(cm.Data["replicas"])
	if err != nil {
		return nil, fmt.Errorf("configmap %s: data.replicas = %q: %w", cm.Name, cm.Data["replicas"], err)
	}
	return &lifecycle.Owner{
		Ref:      lifecycle.Ref{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID},
		Replicas: n,
		Policy:   lifecycle.Policy{WhenDeleted: lifecycle.Action(cm.Data["whenDeleted"]), WhenScaled: lifecycle.Action(cm.Data["whenScaled"])},
		Version:  cm.ResourceVersion,
		Deleting: cm.DeletionTimestamp != nil,
	}, nil
}

// claimSet returns the ClaimSet of owner: pod <name>-<i> with claim
// data-<name>-<i>, labelled app=<name>.
func (o claimSetOwner) claimSet(owner lifecycle.Owner) lifecycle.ClaimSet {
	return lifecycle.ClaimSet{
		Namespace: o.ns,
		Owner:     owner,
		Reread:    o.read,
		Label:     "app",
		Pod: func(i int) (*corev1.Pod, error) {
			return &corev1.Pod{Spec: o.pod(fmt.Sprintf("data-%s-%d", o.name, i))}, nil
		},
		Claims: func(i int) ([]*corev1.PersistentVolumeClaim, error) {
			return []*corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-%s-%d", o.name, i)}, Spec: o.claim()}}, nil
		},
	}
}

// claimSetOperator is the scenarios' workload for the claim set: each step
// reads the owner and makes one SyncSet call.
type claimSetOperator struct {
	base
	owner   claimSetOwner
	m       *lifecycle.Manager
	deleted bool
	last    lifecycle.Owner
}

func newClaimSetOperator(c kubernetes.Interface, m *lifecycle.Manager, ns, name string) *claimSetOperator {
	o := &claimSetOperator{base: base{c: c, ns: ns, name: name, firstUIDs: map[string]types.UID{}}, m: m,
		owner: claimSetOwner{c: c, ns: ns, name: name}}
	o.ownerRef = func(r *metav1.OwnerReference) bool { return r.Kind == "ConfigMap" && r.Name == name }
	o.ownerGone = func(ctx context.Context) (bool, error) { return configMapOwner{c}.gone(ctx, ns, name) }
	return o
}

func (o *claimSetOperator) create(ctx context.Context, replicas int, p lifecycle.Policy) error {
	if err := o.owner.write(ctx, replicas, p); err != nil {
		return err
	}
	return o.step(ctx)
}

func (o *claimSetOperator) scale(ctx context.Context, n int) error {
	if err := o.owner.write(ctx, n, o.last.Policy); err != nil {
		return err
	}
	return o.step(ctx)
}

func (o *claimSetOperator) setPolicy(ctx context.Context, p lifecycle.Policy) error {
	if err := o.owner.write(ctx, o.last.Replicas, p); err != nil {
		return err
	}
	return o.step(ctx)
}

func (o *claimSetOperator) deletePod(ctx context.Context, i int) error {
	return o.c.CoreV1().Pods(o.ns).Delete(ctx, fmt.Sprintf("%s-%d", o.name, i), metav1.DeleteOptions{})
}

func (o *claimSetOperator) deleteOwner(ctx context.Context, p metav1.DeletionPropagation) error {
	o.deleted = true
	return configMapOwner{o.c}.delete(ctx, o.ns, o.name, p)
}

func (o *claimSetOperator) ready(ctx context.Context) (bool, error) {
	if o.deleted {
		return configMapOwner{o.c}.gone(ctx, o.ns, o.name)
	}
	return podsReady(ctx, o.c, o.ns, o.name, o.last.Replicas)
}

func (o *claimSetOperator) snapshot(ctx context.Context) (snapshot, error) {
	return o.snapshotWith(ctx, "data-"+o.name+"-", o.name+"-")
}

func (o *claimSetOperator) step(ctx context.Context) error {
	owner, err := o.owner.read(ctx)
	if err != nil || owner == nil {
		return err
	}
	o.last = *owner
	_, err = o.m.SyncSet(ctx, o.owner.claimSet(*owner), nil)
	return err
}

// ---- tests of SyncSet against the real API server and controller manager ----

func newManager(t *testing.T, k *testenv.Kubernetes) *lifecycle.Manager {
	t.Helper()
	m, err := lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(k.Client.CoreV1())})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// podNames lists the names of the namespace's pods that are not being
// deleted, with their UIDs.
func podUIDs(t *testing.T, ctx context.Context, c kubernetes.Interface, ns string) map[string]types.UID {
	t.Helper()
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.UID
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}

// syncUntil calls SyncSet (reading the owner first) until done says so.
func syncUntil(t *testing.T, ctx context.Context, m *lifecycle.Manager, o claimSetOwner, what string, done func(lifecycle.SetResult) bool) lifecycle.SetResult {
	t.Helper()
	var res lifecycle.SetResult
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		owner, err := o.read(ctx)
		if err != nil || owner == nil {
			return false, err
		}
		res, err = m.SyncSet(ctx, o.claimSet(*owner), nil)
		if err != nil {
			return false, err
		}
		return done(res), nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last result %+v)", what, err, res)
	}
	return res
}

// A pod whose claim is being deleted waits: SyncSet neither reuses the
// claim nor creates the pod until the claim is gone, then creates a fresh
// claim and the pod (KEP-1847: "will wait until the old PVC for the removed
// Pod is deleted").
func TestClaimSetWaitsForATerminatingClaim(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := t.Context()
	m := newManager(t, k)
	o := claimSetOwner{c: k.Client, ns: k.Namespace, name: "db"}
	if err := o.write(ctx, 1, lifecycle.Policy{}); err != nil {
		t.Fatal(err)
	}
	// A claim of the name pod db-0 mounts, held terminating by a finalizer.
	claims := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace)
	old, err := claims.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-db-0",
		Finalizers: []string{"example.test/hold"}}, Spec: claimSpec()}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := claims.Delete(ctx, "data-db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	owner, err := o.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.SyncSet(ctx, o.claimSet(*owner), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Waiting) != 1 || !strings.Contains(res.Waiting[0], "pod db-0 waits: claim data-db-0 is being deleted") || res.RequeueAfter <= 0 {
		t.Fatalf("SyncSet with a terminating claim: waiting %q, requeue %s; want pod db-0 waiting for it, and a requeue", res.Waiting, res.RequeueAfter)
	}
	if pods := podUIDs(t, ctx, k.Client, k.Namespace); len(pods) != 0 {
		t.Fatalf("pods %v created while their claim terminates", sortedKeys(pods))
	}
	if _, err := claims.Patch(ctx, "data-db-0", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	syncUntil(t, ctx, m, o, "after the claim is gone", func(r lifecycle.SetResult) bool { return r.Ready == 1 })
	fresh, err := claims.Get(ctx, "data-db-0", metav1.GetOptions{})
	if err != nil || fresh.UID == old.UID {
		t.Fatalf("claim data-db-0 after the wait: %v (uid %v, the terminating one had %s); want a fresh claim", err, fresh.UID, old.UID)
	}
	if fresh.Labels["app"] != "db" || fresh.Annotations[m.Annotations().PodNameKey()] != "db-0" {
		t.Errorf("fresh claim labels %v annotations %v: want app=db and the pod-name annotation", fresh.Labels, fresh.Annotations)
	}
}

// Before a pod is deleted on scale-down, the owner is read again from the
// API server: a scale-down decided on a stale read (the cache still shows
// it, the owner was scaled back up since) deletes nothing, and neither does
// one whose owner is gone, being deleted, or recreated under its name (the
// fresh read is Reread's answer). The pod that is deleted carries the
// version of the fresh read that condemned it, not the stale one.
func TestClaimSetScaleDownRereadsTheOwner(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := t.Context()
	m := newManager(t, k)
	o := claimSetOwner{c: k.Client, ns: k.Namespace, name: "db"}
	p, _ := lifecycle.DeleteOnScaledownOnly.Policy()
	if err := o.write(ctx, 3, p); err != nil {
		t.Fatal(err)
	}
	syncUntil(t, ctx, m, o, "create", func(r lifecycle.SetResult) bool { return r.Ready == 3 })

	// The read a reconcile decides on: scaled to 1.
	if err := o.write(ctx, 1, p); err != nil {
		t.Fatal(err)
	}
	stale, err := o.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := *stale
	other.Ref.UID = "another-uid"
	deleting := *stale
	deleting.Deleting = true
	for _, tc := range []struct {
		name   string
		change func() error
		reread func(context.Context) (*lifecycle.Owner, error)
	}{
		{"scaled back to 3 since", func() error { return o.write(ctx, 3, p) }, o.read},
		{"gone since", nil, func(context.Context) (*lifecycle.Owner, error) { return nil, nil }},
		{"being deleted since", nil, func(context.Context) (*lifecycle.Owner, error) { return &deleting, nil }},
		{"recreated under its name since", nil, func(context.Context) (*lifecycle.Owner, error) { return &other, nil }},
	} {
		if tc.change != nil {
			if err := tc.change(); err != nil {
				t.Fatal(err)
			}
		}
		set := o.claimSet(*stale)
		set.Reread = tc.reread
		res, err := m.SyncSet(ctx, set, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := podUIDs(t, ctx, k.Client, k.Namespace); len(got) != 3 {
			t.Fatalf("%s: a scale-down decided on a stale read deleted a pod: pods %v, actions %+v", tc.name, sortedKeys(got), res.Actions)
		}
		if !slices.Equal(res.Condemned, []int{2, 1}) {
			t.Errorf("%s: condemned %v, want [2 1] (as the stale read says)", tc.name, res.Condemned)
		}
	}

	// Scaled down again for real: db-2 goes, carrying the version of the
	// fresh read.
	if err := o.write(ctx, 1, p); err != nil {
		t.Fatal(err)
	}
	fresh, err := o.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := k.Client.CoreV1().Pods(k.Namespace).Get(ctx, "db-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := k.Client.CoreV1().Pods(k.Namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=db-2", ResourceVersion: pod.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	res, err := m.SyncSet(ctx, o.claimSet(*stale), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.Actions, func(a lifecycle.SetAction) bool { return a.Verb == "Delete" && a.Name == "db-2" && !a.DryRun }) {
		t.Fatalf("actions %+v: want db-2 deleted", res.Actions)
	}
	key := lifecycle.DefaultAnnotationPrefix + lifecycle.CondemnedSuffix
	for ev := range w.ResultChan() {
		if ev.Type == watch.Deleted {
			if v := ev.Object.(*corev1.Pod).Annotations[key]; v != fresh.Version {
				t.Errorf("pod db-2 was deleted with %s = %q, want the version of the fresh read %s (the stale one was %s)", key, v, fresh.Version, stale.Version)
			}
			return
		}
	}
	t.Error("watch ended before db-2 was deleted")
}

// A scale-down decides on the policy of its fresh read: a cached owner
// that says whenScaled: Delete, when the API server says Retain since,
// deletes no pod in this call (the claim references it just wrote follow
// the cached policy), and the next calls, on the fresh owner, write the
// references of Retain and then delete the pod: the garbage collector has
// nothing to delete the claim by, and it stays.
func TestClaimSetScaleDownDecidesOnTheFreshPolicy(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := t.Context()
	m := newManager(t, k)
	o := claimSetOwner{c: k.Client, ns: k.Namespace, name: "db"}
	deleteOnScaledown, _ := lifecycle.DeleteOnScaledownOnly.Policy()
	if err := o.write(ctx, 2, deleteOnScaledown); err != nil {
		t.Fatal(err)
	}
	syncUntil(t, ctx, m, o, "create", func(r lifecycle.SetResult) bool { return r.Ready == 2 })
	claims := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace)
	claim, err := claims.Get(ctx, "data-db-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := k.Client.CoreV1().Pods(k.Namespace).Get(ctx, "db-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A fence: the garbage collector deletes this ConfigMap once pod db-1
	// is gone, as it would every dependent of the pod.
	fence, err := k.Client.CoreV1().ConfigMaps(k.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "fence-db-1", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The cache's read: scaled to 1 under whenScaled: Delete. The API
	// server's: scaled to 1 under Retain.
	if err := o.write(ctx, 1, deleteOnScaledown); err != nil {
		t.Fatal(err)
	}
	cached, err := o.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.write(ctx, 1, lifecycle.Policy{}); err != nil {
		t.Fatal(err)
	}
	res, err := m.SyncSet(ctx, o.claimSet(*cached), nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(res.Actions, func(a lifecycle.SetAction) bool { return a.Verb == "Delete" }) {
		// The garbage collector follows the references written from the
		// cached policy: wait for its verdict on the claim.
		waitFor(t, ctx, "the garbage collector to delete claim "+claim.Name, func() (bool, error) {
			got, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err) || (err == nil && got.DeletionTimestamp != nil), client(err)
		})
		t.Fatalf("a scale-down decided on the cached policy (whenScaled: Delete) although the fresh read says Retain: "+
			"the garbage collector deleted claim %s (actions %+v)", claim.Name, res.Actions)
	}
	if got := podUIDs(t, ctx, k.Client, k.Namespace); got["db-1"] != pod.UID {
		t.Fatalf("pod db-1 (uid %s) is gone after a call whose fresh read changed the policy: pods %v", pod.UID, got)
	}
	if !slices.Equal(res.Condemned, []int{1}) || res.RequeueAfter == 0 {
		t.Errorf("condemned %v, requeue after %v: want [1] and a requeue (the next call decides again)", res.Condemned, res.RequeueAfter)
	}

	// The next calls read the owner fresh: Retain's references, then the
	// pod goes.
	syncUntil(t, ctx, m, o, "scale-down under Retain", func(r lifecycle.SetResult) bool { return r.Ready == 1 && len(r.Condemned) == 0 })
	waitFor(t, ctx, "the garbage collector to delete "+fence.Name+", a dependent of pod db-1", func() (bool, error) {
		_, err := k.Client.CoreV1().ConfigMaps(k.Namespace).Get(ctx, fence.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), client(err)
	})
	got, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("claim %s after the scale-down under Retain: %v", claim.Name, err)
	}
	if got.UID != claim.UID || got.DeletionTimestamp != nil {
		t.Fatalf("claim %s: uid %s (was %s), deletion %v: want it kept under Retain", claim.Name, got.UID, claim.UID, got.DeletionTimestamp)
	}
	for _, r := range got.OwnerReferences {
		if r.Kind == "Pod" {
			t.Fatalf("claim %s still refers to pod %s (uid %s): the garbage collector would delete it", claim.Name, r.Name, r.UID)
		}
	}
}

// waitFor polls done until it says so, for at most 30 seconds.
func waitFor(t *testing.T, ctx context.Context, what string, done func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return done() })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// stalePods is a pod cache that lags: it answers with the pods it was
// given.
type stalePods []*corev1.Pod

func (s stalePods) ListPods(context.Context, string, labels.Selector) ([]*corev1.Pod, error) {
	return s, nil
}

// A scale-down deletes exactly the pod it decided on: a condemned pod that
// was replaced by another of the same name since (a new UID) is neither
// annotated nor deleted (the UID in the patch, the UID precondition), and
// the next call, on a fresh list, deletes the replacement.
func TestClaimSetDeletesOnlyThePodDecidedOn(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := t.Context()
	m := newManager(t, k)
	o := claimSetOwner{c: k.Client, ns: k.Namespace, name: "db"}
	if err := o.write(ctx, 3, lifecycle.Policy{}); err != nil {
		t.Fatal(err)
	}
	syncUntil(t, ctx, m, o, "create", func(r lifecycle.SetResult) bool { return r.Ready == 3 })
	pods := k.Client.CoreV1().Pods(k.Namespace)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cached stalePods
	var decidedOn *corev1.Pod
	for i := range list.Items {
		cached = append(cached, &list.Items[i])
		if list.Items[i].Name == "db-2" {
			decidedOn = &list.Items[i]
		}
	}
	// db-2 is replaced under the cache's feet.
	if err := pods.Delete(ctx, "db-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	replacement := decidedOn.DeepCopy()
	replacement.ObjectMeta = metav1.ObjectMeta{Name: "db-2", Labels: decidedOn.Labels, OwnerReferences: decidedOn.OwnerReferences}
	if replacement, err = pods.Create(ctx, replacement, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := o.write(ctx, 2, lifecycle.Policy{}); err != nil {
		t.Fatal(err)
	}
	owner, err := o.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set := o.claimSet(*owner)
	set.PodCache = cached
	res, err := m.SyncSet(ctx, set, nil)
	if err != nil {
		t.Fatalf("SyncSet deciding on a replaced pod: %v (want nil: the next call decides again)", err)
	}
	got, err := pods.Get(ctx, "db-2", metav1.GetOptions{})
	if err != nil || got.UID != replacement.UID {
		t.Fatalf("the replacement pod was deleted: %v (actions %+v)", err, res.Actions)
	}
	if v, ok := got.Annotations[lifecycle.DefaultAnnotationPrefix+lifecycle.CondemnedSuffix]; ok {
		t.Fatalf("the replacement pod was annotated as condemned (%q)", v)
	}
	syncUntil(t, ctx, m, o, "scale-down on a fresh list", func(r lifecycle.SetResult) bool {
		_, err := pods.Get(ctx, "db-2", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// A dry run reads and decides as the real call does and writes nothing:
// no claim, pod or owner reference, and no pod deleted; its actions say
// what would be done. With CreateMissing it creates the missing claims
// (without owner references) and pods, and still deletes nothing.
func TestClaimSetDryRun(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := t.Context()
	m := newManager(t, k)
	o := claimSetOwner{c: k.Client, ns: k.Namespace, name: "db"}
	p, _ := lifecycle.DeleteOnScaledownAndOwnerDeletion.Policy()
	if err := o.write(ctx, 2, p); err != nil {
		t.Fatal(err)
	}
	owner, err := o.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.SyncSet(ctx, o.claimSet(*owner), &lifecycle.SetOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range res.Actions {
		if !a.DryRun {
			t.Errorf("action %+v taken in a dry run", a)
		}
		got = append(got, string(a.Verb)+" "+a.Name)
	}
	if want := []string{"Create data-db-0", "Create db-0", "Create data-db-1", "Create db-1"}; !slices.Equal(got, want) {
		t.Errorf("dry run actions %q, want %q", got, want)
	}
	claims, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(claims.Items) != 0 || len(podUIDs(t, ctx, k.Client, k.Namespace)) != 0 {
		t.Fatalf("a dry run created objects: %d claims (%v)", len(claims.Items), err)
	}

	res, err = m.SyncSet(ctx, o.claimSet(*owner), &lifecycle.SetOptions{DryRun: true, CreateMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ready != 2 || len(podUIDs(t, ctx, k.Client, k.Namespace)) != 2 {
		t.Fatalf("CreateMissing: ready %d; want both pods created", res.Ready)
	}
	claims, err = k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		if len(c.OwnerReferences) != 0 {
			t.Errorf("claim %s created in a dry run with owner references %v", c.Name, c.OwnerReferences)
		}
	}
	if err := o.write(ctx, 1, p); err != nil {
		t.Fatal(err)
	}
	owner, err = o.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err = m.SyncSet(ctx, o.claimSet(*owner), &lifecycle.SetOptions{DryRun: true, CreateMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	var refs, deletes int
	for _, a := range res.Actions {
		switch {
		case a.Verb == "SetOwnerReferences" && a.DryRun:
			refs++
		case a.Verb == "Delete" && a.Name == "db-1" && a.DryRun && strings.Contains(a.Message, "whenScaled=Delete"):
			deletes++
		}
	}
	if refs != 2 || deletes != 1 {
		t.Errorf("dry run of a scale-down: actions %+v; want both claims re-owned and db-1 deleted, not done", res.Actions)
	}
	if len(podUIDs(t, ctx, k.Client, k.Namespace)) != 2 {
		t.Error("a dry run deleted a pod")
	}
}

// Bad input is refused naming the field, before any request.
func TestClaimSetRejectsBadInput(t *testing.T) {
	m, err := lifecycle.New(lifecycle.Config{Client: newMemClient()})
	if err != nil {
		t.Fatal(err)
	}
	ok := lifecycle.ClaimSet{Namespace: "ns", Owner: lifecycle.Owner{Ref: lifecycle.Ref{APIVersion: "v1", Kind: "ConfigMap", Name: "db", UID: "u1"}}, Label: "app",
		Pod:    func(int) (*corev1.Pod, error) { return &corev1.Pod{}, nil },
		Reread: func(context.Context) (*lifecycle.Owner, error) { return nil, nil }}
	for _, tc := range []struct {
		want string
		edit func(*lifecycle.ClaimSet)
	}{
		{"ClaimSet.Namespace", func(s *lifecycle.ClaimSet) { s.Namespace = "" }},
		{"ClaimSet.Owner.Ref", func(s *lifecycle.ClaimSet) { s.Owner.Ref.UID = "" }},
		{"ClaimSet.Owner.Replicas = -1", func(s *lifecycle.ClaimSet) { s.Owner.Replicas = -1 }},
		{"ClaimSet.Label", func(s *lifecycle.ClaimSet) { s.Label = "" }},
		{"ClaimSet.Pod", func(s *lifecycle.ClaimSet) { s.Pod = nil }},
		{"ClaimSet.Reread", func(s *lifecycle.ClaimSet) { s.Reread = nil }},
		{`whenScaled = "Sometimes"`, func(s *lifecycle.ClaimSet) { s.Owner.Policy.WhenScaled = "Sometimes" }},
	} {
		s := ok
		tc.edit(&s)
		_, err := m.SyncSet(context.Background(), s, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) ||
			!(errors.Is(err, lifecycle.ErrInvalidInput) || errors.Is(err, lifecycle.ErrInvalidPolicy)) {
			t.Errorf("%s: got %v", tc.want, err)
		}
	}
}

// The owner's status condition from a SyncSet result: the error first,
// then conflicts, stale references, waiting pods; else True.
func TestSetResultCondition(t *testing.T) {
	for _, tc := range []struct {
		name   string
		res    lifecycle.SetResult
		err    error
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{"all well", lifecycle.SetResult{Policy: lifecycle.DeleteOnScaledownOnly}, nil, metav1.ConditionTrue, lifecycle.ReasonReconciled, "claims follow policy DeleteOnScaledownOnly"},
		{"failed", lifecycle.SetResult{Conflicts: []string{"a"}}, errors.New("boom"), metav1.ConditionFalse, lifecycle.ReasonClaimOwnersFailed, "boom"},
		{"conflict before stale", lifecycle.SetResult{Conflicts: []string{"a", "b"}, Stale: []string{"c"}}, nil, metav1.ConditionFalse, lifecycle.ReasonConflictingController,
			"claims a, b are controlled by another object; the policy does not apply to them"},
		{"stale before waiting", lifecycle.SetResult{Stale: []string{"c"}, Waiting: []string{"w"}}, nil, metav1.ConditionFalse, lifecycle.ReasonStaleOwnerReference,
			"claims c refer to an earlier owner or pod of the same name; left to the garbage collector"},
		{"waiting", lifecycle.SetResult{Waiting: []string{"pod x-1 waits: a", "pod x-2 waits: b"}}, nil, metav1.ConditionFalse, lifecycle.ReasonWaitingForClaim, "pod x-1 waits: a; pod x-2 waits: b"},
	} {
		c := tc.res.Condition("ClaimsReady", tc.err)
		if c.Type != "ClaimsReady" || c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.msg {
			t.Errorf("%s: %+v; want %s %s %q", tc.name, c, tc.status, tc.reason, tc.msg)
		}
	}
}
