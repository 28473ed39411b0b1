package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// statefulSet creates the StatefulSet etcd of three members as
// statefulSetMembers needs it, and waits until the StatefulSet controller
// made its pods and claims.
func statefulSet(t *testing.T, k *testenv.Kubernetes) {
	t.Helper()
	statefulSetIn(t, k, k.Namespace)
}

// statefulSetIn is statefulSet in namespace ns.
func statefulSetIn(t *testing.T, k *testenv.Kubernetes, ns string) *appsv1.StatefulSet {
	t.Helper()
	labels := map[string]string{"app": "etcd"}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(3)), ServiceName: "etcd", Selector: &metav1.LabelSelector{MatchLabels: labels},
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.0-0",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/etcd"}}}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}},
		},
	}
	sts, err := k.Client.AppsV1().StatefulSets(ns).Create(t.Context(), sts, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns == k.Namespace {
		for i := range 3 {
			waitUID(t, k, "pod", "etcd-"+itoa(i), "")
			waitUID(t, k, "claim", "data-etcd-"+itoa(i), "")
		}
	}
	return sts
}

// uid returns the UID of the pod or claim name, "" when there is none.
func uid(t *testing.T, k *testenv.Kubernetes, kind, name string) types.UID {
	t.Helper()
	var (
		m   metav1.Object
		err error
	)
	if kind == "pod" {
		m, err = k.Client.CoreV1().Pods(k.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	} else {
		m, err = k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	}
	if err != nil {
		return ""
	}
	return m.GetUID()
}

// waitUID waits until the pod or claim name exists with another UID than
// old, and returns it.
func waitUID(t *testing.T, k *testenv.Kubernetes, kind, name string, old types.UID) types.UID {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if u := uid(t, k, kind, name); u != "" && u != old {
			return u
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: not created (anew) within a minute", kind, name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func env(t *testing.T, k *testenv.Kubernetes, pod string) map[string]string {
	t.Helper()
	p, err := k.Client.CoreV1().Pods(k.Namespace).Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		out[e.Name] = e.Value
	}
	return out
}

// statefulSetMembers on a real API server and kube-controller-manager's
// StatefulSet, PVC protection and pod GC controllers, through the calls a
// recovery makes in its order: every member stopped (the StatefulSet at 0
// replicas, its pods gone), the first's claim deleted and restored into
// (the snapshot in the bucket, named in the template), the first started
// as a new cluster (a new pod and a new, empty claim, with its initial
// cluster), the second stopped (nothing to do), wiped (its old claim gone)
// and started as existing, without touching the first's pod. A wipe while
// the member's pod exists is refused and deletes nothing. There is no
// kubelet and no scheduler: the pods never run, so no etcd starts and no
// init container restores; see the README.
func TestStatefulSetMembers(t *testing.T) {
	k := testenv.StartKubernetes(t)
	statefulSet(t, k)
	bucket := t.TempDir()
	m := &statefulSetMembers{Client: k.Client, Namespace: k.Namespace, Name: "etcd", Service: "etcd", Claim: "data", Container: "etcd", Size: 3,
		Backups: func(context.Context) (*blob.Bucket, error) { return fileblob.OpenBucket(bucket, nil) }}
	ctx := t.Context()
	if got := m.List(); len(got) != 3 || got[1].PeerURL != "http://etcd-1.etcd."+k.Namespace+".svc:2380" {
		t.Errorf("List() = %+v", got)
	}
	if err := m.Stop(ctx, "etcd-3"); err == nil || !strings.Contains(err.Error(), `member "etcd-3": not one of StatefulSet`) {
		t.Errorf("Stop of no member: %v", err)
	}
	claim1 := uid(t, k, "claim", "data-etcd-1")
	if err := m.Wipe(ctx, "etcd-1"); err == nil || !strings.Contains(err.Error(), "its pod exists: stop it first") {
		t.Errorf("Wipe of a member whose pod exists: %v; want refused", err)
	}
	if c, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).Get(ctx, "data-etcd-1", metav1.GetOptions{}); err != nil || c.DeletionTimestamp != nil {
		t.Fatalf("claim of a running member after a refused wipe: %v, %v; want it untouched", c, err)
	}
	pod0 := uid(t, k, "pod", "etcd-0")

	for _, name := range []string{"etcd-0", "etcd-1", "etcd-2"} { // the recovery's stop step
		if err := m.Stop(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	sts, err := k.Client.AppsV1().StatefulSets(k.Namespace).Get(ctx, "etcd", metav1.GetOptions{})
	if err != nil || *sts.Spec.Replicas != 0 {
		t.Fatalf("StatefulSet after stopping every member: %v, %v; want 0 replicas", sts.Spec.Replicas, err)
	}
	for i := range 3 {
		if u := uid(t, k, "pod", "etcd-"+itoa(i)); u != "" {
			t.Errorf("pod etcd-%d exists after Stop", i)
		}
	}

	claim0 := uid(t, k, "claim", "data-etcd-0")
	for range 2 { // idempotent
		if err := m.Wipe(ctx, "etcd-0"); err != nil {
			t.Fatal(err)
		}
	}
	if u := uid(t, k, "claim", "data-etcd-0"); u != "" {
		t.Fatalf("claim data-etcd-0 exists after Wipe")
	}
	snap := filepath.Join(t.TempDir(), "snap.db")
	body := []byte("the compacted snapshot (its content is not read here, only its SHA-256 trailer)")
	sum := sha256.Sum256(body)
	if err := os.WriteFile(snap, append(body, sum[:]...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Restore(ctx, "etcd-0", snap); err != nil {
		t.Fatal(err)
	}
	sts0, err := k.Client.AppsV1().StatefulSets(k.Namespace).Get(ctx, "etcd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := "Restore-" + k.Namespace + ".etcd-" + string(sts0.UID) + "-etcd-0.db"
	if got, err := os.ReadFile(filepath.Join(bucket, key)); err != nil || !bytes.Equal(got, append(body, sum[:]...)) {
		t.Errorf("snapshot in the bucket: %q, %v; want the file restored", got, err)
	}
	cluster := "etcd-0=" + m.List()[0].PeerURL
	if err := m.Start(ctx, "etcd-0", cluster, "new"); err != nil {
		t.Fatal(err)
	}
	newPod0 := waitUID(t, k, "pod", "etcd-0", pod0)
	newClaim0 := waitUID(t, k, "claim", "data-etcd-0", claim0)
	want := map[string]string{envInitialCluster: cluster, envInitialClusterState: "new", envRestoreSnapshot: key}
	if got := env(t, k, "etcd-0"); !maps.Equal(got, want) {
		t.Errorf("pod etcd-0's environment: %v, want %v", got, want)
	}
	t.Logf("etcd-0: pod %s → %s, claim %s → %s", pod0, newPod0, claim0, newClaim0)

	// The recovery's "add etcd-1": stop (nothing runs), wipe, start.
	if err := m.Stop(ctx, "etcd-1"); err != nil {
		t.Fatal(err)
	}
	if u := uid(t, k, "pod", "etcd-0"); u != newPod0 {
		t.Fatalf("Stop of etcd-1 stopped etcd-0")
	}
	if err := m.Wipe(ctx, "etcd-1"); err != nil {
		t.Fatal(err)
	}
	cluster += ",etcd-1=" + m.List()[1].PeerURL
	if err := m.Start(ctx, "etcd-1", cluster, "existing"); err != nil {
		t.Fatal(err)
	}
	newClaim1 := waitUID(t, k, "claim", "data-etcd-1", claim1)
	waitUID(t, k, "pod", "etcd-1", "")
	want = map[string]string{envInitialCluster: cluster, envInitialClusterState: "existing"}
	if got := env(t, k, "etcd-1"); !maps.Equal(got, want) {
		t.Errorf("pod etcd-1's environment: %v, want %v", got, want)
	}
	if u := uid(t, k, "pod", "etcd-0"); u != newPod0 {
		t.Errorf("starting etcd-1 replaced etcd-0's pod")
	}
	if u := uid(t, k, "pod", "etcd-2"); u != "" {
		t.Errorf("starting etcd-1 started etcd-2")
	}
	t.Logf("etcd-1: claim %s → %s", claim1, newClaim1)
}

// Two etcd clusters whose StatefulSets have one name ("etcd") in two
// namespaces, backed up into one bucket, are restored one after the other
// (the first's init container has not read its snapshot yet): each pod
// template names a snapshot of its own, and each holds what its recovery
// restored; neither was written over. A StatefulSet replaced (deleted and
// created again) between the upload and the template's write is not
// given the snapshot of the one it replaced.
func TestStatefulSetMembersRestoreKeysTheWholeIdentity(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := t.Context()
	other := k.Namespace + "-b"
	if _, err := k.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bucket := t.TempDir()
	members := map[string]*statefulSetMembers{}
	for _, ns := range []string{k.Namespace, other} {
		statefulSetIn(t, k, ns)
		members[ns] = &statefulSetMembers{Client: k.Client, Namespace: ns, Name: "etcd", Service: "etcd", Claim: "data", Container: "etcd", Size: 3,
			Backups: func(context.Context) (*blob.Bucket, error) { return fileblob.OpenBucket(bucket, nil) }}
	}
	snapshotOf := func(ns string) string {
		path := filepath.Join(t.TempDir(), "snap.db")
		if err := os.WriteFile(path, []byte("the snapshot of the etcd in "+ns), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, ns := range []string{k.Namespace, other} {
		if err := members[ns].Restore(ctx, "etcd-0", snapshotOf(ns)); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{k.Namespace, other} {
		sts, err := k.Client.AppsV1().StatefulSets(ns).Get(ctx, "etcd", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var key string
		for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
			if e.Name == envRestoreSnapshot {
				key = e.Value
			}
		}
		got, err := os.ReadFile(filepath.Join(bucket, key))
		if want := "the snapshot of the etcd in " + ns; err != nil || string(got) != want || !strings.Contains(key, string(sts.UID)) {
			t.Errorf("the etcd in %s restores %q, holding %q (%v); want its own snapshot %q, under a key naming its UID %s", ns, key, got, err, want, sts.UID)
		}
	}

	// Replaced between the upload and the template's write.
	m := members[other]
	replaced := &statefulSetMembers{Client: m.Client, Namespace: other, Name: "etcd", Service: "etcd", Claim: "data", Container: "etcd", Size: 3,
		Backups: func(ctx context.Context) (*blob.Bucket, error) {
			sets := k.Client.AppsV1().StatefulSets(other)
			if err := sets.Delete(ctx, "etcd", metav1.DeleteOptions{}); err != nil {
				return nil, err
			}
			for { // the garbage collector removes no finalizer here: it goes at once
				if _, err := sets.Get(ctx, "etcd", metav1.GetOptions{}); apierrors.IsNotFound(err) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			statefulSetIn(t, k, other)
			return fileblob.OpenBucket(bucket, nil)
		}}
	err := replaced.Restore(ctx, "etcd-0", snapshotOf("the replaced StatefulSet"))
	if err == nil || !strings.Contains(err.Error(), "the StatefulSet was replaced") {
		t.Errorf("Restore into a StatefulSet replaced meanwhile: %v; want refused", err)
	}
	sts, err := k.Client.AppsV1().StatefulSets(other).Get(ctx, "etcd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
		if e.Name == envRestoreSnapshot {
			t.Errorf("the new StatefulSet names the old one's snapshot %s", e.Value)
		}
	}
}

// A StatefulSet that rolls its pods on a template change, or creates them
// in order, cannot be driven member by member: refused, naming the field.
func TestStatefulSetMembersRefuseRollingUpdates(t *testing.T) {
	k := testenv.StartKubernetes(t)
	statefulSet(t, k)
	m := &statefulSetMembers{Client: k.Client, Namespace: k.Namespace, Name: "etcd", Service: "etcd", Claim: "data", Container: "etcd", Size: 3}
	sets := k.Client.AppsV1().StatefulSets(k.Namespace)
	// The StatefulSet controller writes the set meanwhile: read, change,
	// and again on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts, err := sets.Get(t.Context(), "etcd", metav1.GetOptions{})
		if err != nil {
			return err
		}
		sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
		_, err = sets.Update(t.Context(), sts, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err := m.Start(t.Context(), "etcd-0", "etcd-0=http://etcd-0:2380", "new")
	if err == nil || !strings.Contains(err.Error(), `spec.updateStrategy.type "RollingUpdate", want OnDelete`) {
		t.Errorf("Start on a rolling StatefulSet: %v", err)
	}
	if got := env(t, k, "etcd-0"); len(got) != 0 {
		t.Errorf("pod etcd-0's environment changed: %v", got)
	}
}

// afterGet is a transport that calls hook once, after the first GET of a
// path that ends with suffix has returned.
type afterGet struct {
	rt     http.RoundTripper
	suffix string
	once   sync.Once
	hook   func()
}

func (a *afterGet) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.rt.RoundTrip(r)
	if err == nil && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, a.suffix) {
		a.once.Do(a.hook)
	}
	return resp, err
}

// A claim changed between Wipe's read and its delete is not deleted: the
// delete carries the claim's UID and resourceVersion as read.
func TestStatefulSetMembersWipeOnlyTheClaimRead(t *testing.T) {
	k := testenv.StartKubernetes(t)
	statefulSet(t, k)
	cfg := rest.CopyConfig(k.Config)
	claims := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &afterGet{rt: rt, suffix: "/persistentvolumeclaims/data-etcd-2", hook: func() {
			// Someone changes the claim (a label) right after Wipe read it.
			patch := []byte(`{"metadata":{"labels":{"changed":"meanwhile"}}}`)
			if _, err := claims.Patch(t.Context(), "data-etcd-2", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Error(err)
			}
		}}
	})
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := &statefulSetMembers{Client: client, Namespace: k.Namespace, Name: "etcd", Service: "etcd", Claim: "data", Container: "etcd", Size: 3}
	if err := m.Stop(t.Context(), "etcd-2"); err != nil {
		t.Fatal(err)
	}
	err = m.Wipe(t.Context(), "etcd-2")
	if !apierrors.IsConflict(err) {
		t.Fatalf("Wipe of a claim changed after it was read: %v; want a Conflict", err)
	}
	t.Logf("refused: %v", err)
	c, err := claims.Get(t.Context(), "data-etcd-2", metav1.GetOptions{})
	if err != nil || c.DeletionTimestamp != nil {
		t.Fatalf("claim changed meanwhile: %v, %v; want it kept", c, err)
	}
}
