package testenv_test

import (
	"context"
	"fmt"
	"io"
	"sort"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/azureblob" // azblob:// URLs
	_ "gocloud.dev/blob/gcsblob"   // gs:// URLs
	_ "gocloud.dev/blob/s3blob"    // s3:// URLs
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func claim(name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
}

// The garbage collector of the real controller manager removes a claim whose
// only owner was deleted; the PVC protection controller lets it go.
func TestGarbageCollectorDeletesClaimOfDeletedOwner(t *testing.T) {
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	cms := env.Client.CoreV1().ConfigMaps(env.Namespace)
	pvcs := env.Client.CoreV1().PersistentVolumeClaims(env.Namespace)

	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owned := claim("owned")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	if _, err := pvcs.Create(ctx, owned, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pvcs.Create(ctx, claim("unowned"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := pvcs.Get(ctx, "owned", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasFinalizer(created, "kubernetes.io/pvc-protection") {
		t.Errorf("claim finalizers = %v, want the PVC protection finalizer set by the real API server", created.Finalizers)
	}

	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, func(ctx context.Context) error {
		_, err := pvcs.Get(ctx, "owned", metav1.GetOptions{})
		return err
	})
	if _, err := pvcs.Get(ctx, "unowned", metav1.GetOptions{}); err != nil {
		t.Errorf("claim without owner: %v, want it kept", err)
	}
}

// The real StatefulSet controller applies persistentVolumeClaimRetentionPolicy
// on scale-down.
func TestStatefulSetScaleDownDeletesClaims(t *testing.T) {
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	sets := env.Client.AppsV1().StatefulSets(env.Namespace)
	pvcs := env.Client.CoreV1().PersistentVolumeClaims(env.Namespace)

	labels := map[string]string{"app": "db"}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](3),
			ServiceName:         "db",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "db", Image: "db:1",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{*claim("data")},
		},
	}
	if _, err := sets.Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"data-db-0", "data-db-1", "data-db-2"}
	waitClaims(t, env, want)

	_, err := sets.Patch(ctx, "db", "application/merge-patch+json", []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitClaims(t, env, want[:1])
	if _, err := pvcs.Get(ctx, "data-db-0", metav1.GetOptions{}); err != nil {
		t.Errorf("claim of the remaining pod: %v", err)
	}
}

// Each object store of the environment accepts writes, lists by prefix and
// deletes, through gocloud URLs.
func TestBlobStoresWriteListDelete(t *testing.T) {
	for _, store := range testenv.BlobStores(t) {
		t.Run(store.Scheme, func(t *testing.T) {
			ctx := context.Background()
			bucket := store.Open(t)
			const n = 100
			for i := range n {
				if err := bucket.WriteAll(ctx, fmt.Sprintf("backups/a/%03d", i), []byte("data"), nil); err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
			}
			if err := bucket.WriteAll(ctx, "backups/ab/keep", []byte("sibling"), nil); err != nil {
				t.Fatal(err)
			}
			keys := list(t, bucket, "backups/a/")
			if len(keys) != n {
				t.Fatalf("listed %d keys under backups/a/, want %d", len(keys), n)
			}
			for _, k := range keys {
				if err := bucket.Delete(ctx, k); err != nil {
					t.Fatalf("delete %s: %v", k, err)
				}
			}
			if keys := list(t, bucket, "backups/a/"); len(keys) != 0 {
				t.Errorf("after delete, %d keys left: %v", len(keys), keys[:min(5, len(keys))])
			}
			got, err := bucket.ReadAll(ctx, "backups/ab/keep")
			if err != nil || string(got) != "sibling" {
				t.Errorf("sibling prefix: %q, %v; want it untouched", got, err)
			}
		})
	}
}

// etcd serves v3 transactions to the client the lock backend uses.
func TestEtcdServesTransactions(t *testing.T) {
	env := testenv.StartEtcd(t)
	client, err := clientv3.New(clientv3.Config{Endpoints: env.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := env.Prefix + "k"
	resp, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "v1")).
		Commit()
	if err != nil || !resp.Succeeded {
		t.Fatalf("first put if absent: %v, succeeded=%v", err, resp != nil && resp.Succeeded)
	}
	resp, err = client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, "v2")).
		Commit()
	if err != nil || resp.Succeeded {
		t.Fatalf("second put if absent: %v, succeeded=%v; want the compare to fail", err, resp != nil && resp.Succeeded)
	}
	get, err := client.Get(ctx, key)
	if err != nil || len(get.Kvs) != 1 || string(get.Kvs[0].Value) != "v1" {
		t.Fatalf("get: %v %v, want v1", get, err)
	}
}

func list(t *testing.T, b *blob.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("list %s: %v", prefix, err)
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

func hasFinalizer(obj metav1.Object, f string) bool {
	for _, x := range obj.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}

func waitGone(t *testing.T, get func(context.Context) error) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("waiting for deletion: %v", err)
	}
}

func waitClaims(t *testing.T, env *testenv.Kubernetes, want []string) {
	t.Helper()
	var got []string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := env.Client.CoreV1().PersistentVolumeClaims(env.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got = got[:0]
		for _, c := range l.Items {
			got = append(got, c.Name) // terminating claims count: gone means gone
		}
		sort.Strings(got)
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	})
	if err != nil {
		t.Fatalf("claims = %v, want %v: %v", got, want, err)
	}
}

// The pod garbage collector marks an unscheduled pod left terminating as
// failed and force-deletes it, as in a cluster. (A finalizer keeps the pod
// here so that the test can see it; a pod without one is removed.)
func TestPodGCHandlesUnscheduledTerminatingPods(t *testing.T) {
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	pods := env.Client.CoreV1().Pods(env.Namespace)
	const finalizer = "groundskeeper.io/test-keep"
	_, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stuck", Finalizers: []string{finalizer}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/db:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "stuck", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// Let it go.
		_, _ = pods.Patch(ctx, "stuck", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}()
	// The pod garbage collector looks every 20 s.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, "stuck", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.DeletionTimestamp != nil && p.Status.Phase == corev1.PodFailed, nil
	})
	if err != nil {
		t.Fatalf("the terminating unscheduled pod was not marked failed by the pod garbage collector within 90 s: %v", err)
	}
}
