package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// TestClaimFateMatchesSyncSet is TestClaimFateMatchesTheStatefulSetController
// for a custom owner: a Database resource whose operator runs its pods and
// claims with lifecycle's SyncSet (claims named journal-<ordinal>-of-db,
// which no StatefulSet naming would find). For each of the four KEP-1847
// policies it predicts which claims a scale from 3 to 1 and then the
// owner's deletion take; then does it, with SyncSet and the real garbage
// collector, and compares.
func TestClaimFateMatchesSyncSet(t *testing.T) {
	for _, name := range []lifecycle.Name{lifecycle.Retain, lifecycle.DeleteOnOwnerDeletionOnly, lifecycle.DeleteOnScaledownOnly, lifecycle.DeleteOnScaledownAndOwnerDeletion} {
		t.Run(string(name), func(t *testing.T) {
			t.Parallel()
			k := testenv.StartKubernetes(t)
			ctx := context.Background()
			p, err := name.Policy()
			if err != nil {
				t.Fatal(err)
			}
			dbs := customResource(t, k, "databases", "Database")
			sts := p.StatefulSet()
			created, err := dbs.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": testGroup + "/v1", "kind": "Database", "metadata": map[string]any{"name": "db"},
				"spec": map[string]any{"replicas": int64(3), "claimPolicy": map[string]any{
					"whenDeleted": string(sts.WhenDeleted), "whenScaled": string(sts.WhenScaled)}},
			}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			m, err := lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(k.Client.CoreV1())})
			if err != nil {
				t.Fatal(err)
			}
			// One reconcile of the Database's operator.
			reconcile := func() {
				t.Helper()
				owner, err := readDatabase(ctx, dbs, "db")
				if err != nil || owner == nil {
					t.Fatalf("read the Database: %v, %v", owner, err)
				}
				if _, err := m.SyncSet(ctx, databaseSet(k.Namespace, dbs, *owner), nil); err != nil {
					t.Fatal(err)
				}
			}
			claims := func() map[string]bool { return liveClaims(t, k) }
			until := func(what string, cond func() bool) { t.Helper(); waitClaims(t, k, what, cond) }
			reconcile()
			until("the operator made 3 claims", func() bool { return len(claims()) == 3 })

			predict := func(args ...string) plugin.FateView {
				t.Helper()
				r := run(t, plugin.Options{}, kube(k, append([]string{"claims", "fate", "databases." + testGroup + "/db", "--set-label", "app",
					"--policy-field", "spec.claimPolicy", "-o", "json"}, args...)...)...)
				if r.code != 0 {
					t.Fatalf("exit %d: %s", r.code, r.err)
				}
				var v plugin.FateView
				if err := json.Unmarshal([]byte(r.out), &v); err != nil {
					t.Fatal(err)
				}
				if have := claims(); v.Policy != string(name) || v.Owner != "databases."+testGroup+"/db" || len(v.Claims) != len(have) {
					t.Errorf("predicted %+v; want policy %s, owner databases.%s/db, a fate for each of %v", v, name, testGroup, have)
				}
				return v
			}
			check := func(v plugin.FateView, ownerGone string) { t.Helper(); checkFates(t, k, v, ownerGone) }

			scale := predict("--scale-to", "1")
			if _, err := dbs.Patch(ctx, "db", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			until("pods db-1 and db-2 are gone", func() bool {
				reconcile()
				for i := 1; i <= 2; i++ {
					if _, err := k.Client.CoreV1().Pods(k.Namespace).Get(ctx, fmt.Sprintf("db-%d", i), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return false
					}
				}
				return true
			})
			check(scale, "condemned")

			del := predict("--delete")
			if err := dbs.Delete(ctx, "db", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(created.GetUID())},
				PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
				t.Fatal(err)
			}
			until("the Database is gone", func() bool {
				_, err := dbs.Get(ctx, "db", metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			})
			check(del, "db")
			t.Logf("scale to 1: %+v; delete: %+v", scale.Claims, del.Claims)
		})
	}
}

// readDatabase reads the Database owner from the API server; nil when it
// is gone.
func readDatabase(ctx context.Context, dbs dynamic.ResourceInterface, name string) (*lifecycle.Owner, error) {
	u, err := dbs.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	replicas, _, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if err != nil {
		return nil, err
	}
	pol, _, err := unstructured.NestedStringMap(u.Object, "spec", "claimPolicy")
	if err != nil {
		return nil, err
	}
	return &lifecycle.Owner{
		Ref:      lifecycle.Ref{APIVersion: testGroup + "/v1", Kind: "Database", Name: u.GetName(), UID: u.GetUID()},
		Replicas: int(replicas),
		Policy:   lifecycle.Policy{WhenDeleted: lifecycle.Action(pol["whenDeleted"]), WhenScaled: lifecycle.Action(pol["whenScaled"])},
		Version:  u.GetResourceVersion(),
		Deleting: u.GetDeletionTimestamp() != nil,
	}, nil
}

// databaseSet is the Database's claim set: pod db-<i> mounting claim
// journal-<i>-of-db, labelled app=db.
func databaseSet(ns string, dbs dynamic.ResourceInterface, owner lifecycle.Owner) lifecycle.ClaimSet {
	claim := func(i int) string { return fmt.Sprintf("journal-%d-of-%s", i, owner.Ref.Name) }
	return lifecycle.ClaimSet{
		Namespace: ns,
		Owner:     owner,
		Reread:    func(ctx context.Context) (*lifecycle.Owner, error) { return readDatabase(ctx, dbs, owner.Ref.Name) },
		Label:     "app",
		Pod: func(i int) (*corev1.Pod, error) {
			return &corev1.Pod{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "db", Image: "db", VolumeMounts: []corev1.VolumeMount{{Name: "journal", MountPath: "/journal"}}}},
				Volumes: []corev1.Volume{{Name: "journal", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim(i)}}}},
			}}, nil
		},
		Claims: func(i int) ([]*corev1.PersistentVolumeClaim, error) {
			return []*corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: claim(i)}, Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}}}, nil
		},
	}
}

// A custom owner without --set-label, or whose replicas field is missing,
// is refused in one line naming the flag.
func TestClaimFateOfACustomOwnerNamesTheMissingFlag(t *testing.T) {
	k := testenv.StartKubernetes(t)
	dbs := customResource(t, k, "databases", "Database")
	if _, err := dbs.Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": testGroup + "/v1", "kind": "Database", "metadata": map[string]any{"name": "db"}, "spec": map[string]any{"size": int64(3)},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := run(t, plugin.Options{}, kube(k, "claims", "fate", "databases/db", "--scale-to", "1")...)
	oneLineError(t, r, plugin.ExitUsage, "--set-label is required")
	r = run(t, plugin.Options{}, kube(k, "claims", "fate", "databases/db", "--scale-to", "1", "--set-label", "app")...)
	oneLineError(t, r, plugin.ExitError, "databases."+testGroup+"/db: --replicas-field spec.replicas: not set")
}
