package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// TestClaimFateMatchesTheStatefulSetController predicts, for each of the
// four KEP-1847 policies, which claims a scale from 3 to 1 and then the
// StatefulSet's deletion take; then does it, and compares with what the
// real StatefulSet controller and garbage collector did.
func TestClaimFateMatchesTheStatefulSetController(t *testing.T) {
	for _, name := range []lifecycle.Name{lifecycle.Retain, lifecycle.DeleteOnOwnerDeletionOnly, lifecycle.DeleteOnScaledownOnly, lifecycle.DeleteOnScaledownAndOwnerDeletion} {
		t.Run(string(name), func(t *testing.T) {
			t.Parallel()
			k := testenv.StartKubernetes(t)
			ctx := context.Background()
			p, err := name.Policy()
			if err != nil {
				t.Fatal(err)
			}
			sts := &appsv1.StatefulSet{
				ObjectMeta: metav1.ObjectMeta{Name: "db"},
				Spec: appsv1.StatefulSetSpec{
					Replicas:            ptr.To[int32](3),
					PodManagementPolicy: appsv1.ParallelPodManagement,
					Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db"}},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}},
					},
					VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
						ObjectMeta: metav1.ObjectMeta{Name: "data"},
						Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
							Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
					}},
					PersistentVolumeClaimRetentionPolicy: p.StatefulSet(),
				},
			}
			created, err := k.Client.AppsV1().StatefulSets(k.Namespace).Create(ctx, sts, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			claims := func() map[string]bool { return liveClaims(t, k) }
			until := func(what string, cond func() bool) { t.Helper(); waitClaims(t, k, what, cond) }
			until("the controller made 3 claims", func() bool { return len(claims()) == 3 })

			predict := func(args ...string) plugin.FateView {
				t.Helper()
				r := run(t, plugin.Options{}, kube(k, append([]string{"claims", "fate", "db", "-o", "json"}, args...)...)...)
				if r.code != 0 {
					t.Fatalf("exit %d: %s", r.code, r.err)
				}
				var v plugin.FateView
				if err := json.Unmarshal([]byte(r.out), &v); err != nil {
					t.Fatal(err)
				}
				if v.Policy != string(name) {
					t.Errorf("policy %s, want %s", v.Policy, name)
				}
				return v
			}
			check := func(v plugin.FateView, ownerGone string) { t.Helper(); checkFates(t, k, v, ownerGone) }

			scale := predict("--scale-to", "1")
			// As kubectl scale does; the controller writes the status
			// meanwhile, so an update of what was read may conflict.
			if _, err := k.Client.AppsV1().StatefulSets(k.Namespace).Patch(ctx, "db", types.MergePatchType,
				[]byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			until("pods db-1 and db-2 are gone", func() bool {
				for i := 1; i <= 2; i++ {
					if _, err := k.Client.CoreV1().Pods(k.Namespace).Get(ctx, fmt.Sprintf("db-%d", i), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return false
					}
				}
				return true
			})
			check(scale, "condemned")

			del := predict("--delete")
			if err := k.Client.AppsV1().StatefulSets(k.Namespace).Delete(ctx, "db", metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &created.UID}, PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
				t.Fatal(err)
			}
			until("the StatefulSet is gone", func() bool {
				_, err := k.Client.AppsV1().StatefulSets(k.Namespace).Get(ctx, "db", metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			})
			check(del, "db")
			t.Logf("scale to 1: %+v; delete: %+v", scale.Claims, del.Claims)
		})
	}
}

// liveClaims are the names of k's claims that are not being deleted.
func liveClaims(t *testing.T, k *testenv.Kubernetes) map[string]bool {
	t.Helper()
	l, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, c := range l.Items {
		if c.DeletionTimestamp == nil {
			m[c.Name] = true
		}
	}
	return m
}

// waitClaims waits until cond holds, or fails the test naming what it
// waited for and the claims there are.
func waitClaims(t *testing.T, k *testenv.Kubernetes, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting until %s: %v; claims: %v", what, err, liveClaims(t, k))
	}
}

// checkFates compares the prediction v with k's claims, once the predicted
// deletions are done; a kept claim must not depend on anything being
// deleted (no owner reference to ownerGone, or to a pod when ownerGone is
// "condemned").
func checkFates(t *testing.T, k *testenv.Kubernetes, v plugin.FateView, ownerGone string) {
	t.Helper()
	ctx := context.Background()
	for _, f := range v.Claims {
		if f.Fate == "deleted" {
			waitClaims(t, k, f.Claim+" is gone", func() bool {
				_, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).Get(ctx, f.Claim, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			})
		}
	}
	for _, f := range v.Claims {
		if f.Fate != "kept" {
			continue
		}
		c, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).Get(ctx, f.Claim, metav1.GetOptions{})
		if err != nil || c.DeletionTimestamp != nil {
			t.Errorf("%s predicted kept (%s), but: %v", f.Claim, f.Why, err)
			continue
		}
		for _, ref := range c.OwnerReferences {
			if ref.Name == ownerGone || (ref.Kind == "Pod" && ownerGone == "condemned") {
				t.Errorf("%s predicted kept (%s), but its owner references make it depend on %s %s", f.Claim, f.Why, ref.Kind, ref.Name)
			}
		}
	}
}
