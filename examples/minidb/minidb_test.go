package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/yaml"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/crt/tasks"
	"github.com/groundskeeper-io/groundskeeper/examples/minidb/api"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The operator, run on the real API server (with the garbage collector)
// and MinIO: its claims follow the policy on scale-down, its config is
// applied under the lock, the older of two backups goes with its data
// (nothing else in the bucket is touched), and a task succeeds.
func TestOperator(t *testing.T) {
	env := testenv.StartKubernetes(t)
	store := testenv.S3(t)
	ctx := context.Background()
	mgr := env.NewManager(t, Scheme, func(o *manager.Options) {
		o.Cache.DefaultNamespaces = nil // the lock's ConfigMap is in default
	})
	c := mgr.GetClient()
	for _, f := range []string{"minidb.example.com_minidbs.yaml", "minidb.example.com_minidbbackups.yaml"} {
		data, err := os.ReadFile(filepath.Join("crd", f))
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		if err := tasks.InstallCRD(ctx, c, mgr.GetAPIReader(), &crd); err != nil {
			t.Fatal(err)
		}
	}
	if err := Setup(ctx, mgr, Options{LockID: "minidb-0"}); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)
	ns := env.Namespace

	// Claims: two replicas, then one; whenScaled: Delete.
	db := &api.MiniDB{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: api.MiniDBSpec{
		Replicas: 2, Image: "minidb:1", Config: "a", Retention: "last=1",
		ClaimRetention: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType}}}
	must(t, c.Create(ctx, db))
	waitFor(t, "two pods and claims, config a applied", func() bool {
		var got api.MiniDB
		return exists(ctx, c, ns, "db-1", &corev1.Pod{}) && exists(ctx, c, ns, "data-db-1", &corev1.PersistentVolumeClaim{}) &&
			c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, &got) == nil && got.Status.AppliedConfig == "a"
	})
	// A merge patch, not an update: the controller writes the status of
	// the version the test would have read.
	must(t, c.Patch(ctx, db, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`))))
	waitFor(t, "pod db-1 and its claim gone, db-0's kept", func() bool {
		return !exists(ctx, c, ns, "db-1", &corev1.Pod{}) && !exists(ctx, c, ns, "data-db-1", &corev1.PersistentVolumeClaim{}) &&
			exists(ctx, c, ns, "data-db-0", &corev1.PersistentVolumeClaim{})
	})

	// Backups: retention last=1 keeps the newer; the older goes, data first.
	_, err := env.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3"}, StringData: map[string]string{
		backupstore.SecretKeyAccessKeyID: testenv.S3AccessKeyID, backupstore.SecretKeySecretAccessKey: testenv.S3SecretAccessKey,
		backupstore.SecretKeyRegion: testenv.S3Region, backupstore.SecretKeyEndpoint: store.Endpoint, backupstore.SecretKeyS3PathStyle: "true"}}, metav1.CreateOptions{})
	must(t, err)
	bucket := store.Open(t)
	for _, key := range []string{"db/1/data", "db/2/data", "db/10/data", "other/data"} {
		must(t, bucket.WriteAll(ctx, key, []byte(key), nil))
	}
	for i, prefix := range []string{"db/1/", "db/2/"} {
		b := &api.MiniDBBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b" + prefix[3:4]},
			Spec: api.MiniDBBackupSpec{Database: "db", BucketURL: "s3://" + store.Bucket, Prefix: prefix, Secret: "s3"}}
		must(t, c.Create(ctx, b))
		// The collector adds its finalizer meanwhile: retry on conflict,
		// reading from the API server (the cache may not have it yet).
		must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := mgr.GetAPIReader().Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
				return err
			}
			b.Status = api.MiniDBBackupStatus{Phase: "Succeeded", CompletedAt: ptr.To(metav1.NewTime(time.Now().Add(time.Duration(i-2) * time.Hour)))}
			return c.Status().Update(ctx, b)
		}))
	}
	waitFor(t, "backup b1 and its data gone", func() bool {
		ok, err := bucket.Exists(ctx, "db/1/data")
		return err == nil && !ok && !exists(ctx, c, ns, "b1", &api.MiniDBBackup{})
	})
	for _, key := range []string{"db/2/data", "db/10/data", "other/data"} {
		if ok, err := bucket.Exists(ctx, key); err != nil || !ok {
			t.Errorf("%s: exists %v (%v), want kept", key, ok, err)
		}
	}
	if !exists(ctx, c, ns, "b2", &api.MiniDBBackup{}) {
		t.Error("backup b2, the newest, is gone")
	}

	// A task runs to Succeeded; a task with no operation is refused.
	task := &api.MiniDBTask{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reindex"},
		Spec: api.MiniDBTaskSpec{Database: ptr.To("db"), Config: api.MiniDBTaskConfig{Reindex: &api.ReindexConfig{}}}}
	must(t, c.Create(ctx, task))
	waitFor(t, "task Succeeded", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(task), task) == nil && task.Status.State == opstask.TaskStateSucceeded
	})
	err = c.Create(ctx, &api.MiniDBTask{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "none"}, Spec: api.MiniDBTaskSpec{Database: ptr.To("db")}})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "exactly one of reindex") {
		t.Errorf("a task without an operation: %v, want Invalid naming the one-of", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func exists(ctx context.Context, c client.Client, ns, name string, obj client.Object) bool {
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	return err == nil && obj.GetDeletionTimestamp() == nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Bad flags are refused before anything connects, each error naming the
// flag or the argument.
func TestRunRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
		{[]string{"--lock-id="}, "--lock-id is empty"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
	} {
		t.Setenv("HOSTNAME", "")
		err := run(t.Context(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
