package backups_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
	"github.com/groundskeeper-io/groundskeeper/retention"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// On a started manager (its cache, not a fake client): a Collection adds the
// finalizer to a new backup; a backup deleted by its owner keeps the
// resource until its data is gone, and only its data; an expired one is
// collected by the pass.
func TestCollectOnAManager(t *testing.T) {
	k := testenv.StartKubernetes(t)
	if _, err := testbackup.Install(k.Config); err != nil {
		t.Fatal(err)
	}
	store := testenv.S3(t)
	bucket := store.Open(t)
	ctx := context.Background()
	if _, err := k.Client.CoreV1().Secrets(k.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "minio"},
		StringData: map[string]string{
			backupstore.SecretKeyAccessKeyID: testenv.S3AccessKeyID, backupstore.SecretKeySecretAccessKey: testenv.S3SecretAccessKey,
			backupstore.SecretKeyRegion: testenv.S3Region, backupstore.SecretKeyEndpoint: store.Endpoint, backupstore.SecretKeyS3PathStyle: "true",
		}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := testbackup.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mgr := k.NewManager(t, scheme)
	const finalizer = "collect.groundskeeper.example.com/data"
	c, err := collect.New(collect.Config[*testbackup.Backup]{
		Objects: backups.Objects[*testbackup.Backup](mgr.GetClient(), mgr.GetAPIReader()),
		Secrets: crt.Secrets(mgr.GetAPIReader()),
		Location: func(_ context.Context, b *testbackup.Backup) (collect.Location, error) {
			return collect.Location{URL: "s3://" + b.Spec.Bucket, Prefix: b.Spec.Prefix, Secret: b.Spec.Secret}, nil
		},
		Keep: collect.BackupPolicy[*testbackup.Backup](func(b *testbackup.Backup) (retention.Policy, error) {
			d, err := retention.ParseDuration(b.Spec.TTL)
			return retention.TTL{After: d}, err
		}),
		Finalizer: &collect.Finalizer[*testbackup.Backup]{Name: finalizer},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (backups.Collection[*testbackup.Backup]{Name: "backup-gc", Collector: c}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	cl, err := client.New(k.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	create := func(name, ttl string) []string {
		b := &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: name},
			Spec: testbackup.Spec{Bucket: store.Bucket, Prefix: "db/" + name + "/", Secret: "minio", TTL: ttl}}
		if err := cl.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		key := "db/" + name + "/data"
		if err := bucket.WriteAll(ctx, key, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
		return []string{key}
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if ok() {
				return
			}
		}
		t.Fatalf("timed out waiting: %s", what)
	}
	keep := create("keep", "300d")
	create("mine", "300d")
	eventually("finalizers added", func() bool {
		for _, n := range []string{"keep", "mine"} {
			var b testbackup.Backup
			if cl.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: n}, &b) != nil || !slices.Contains(b.Finalizers, finalizer) {
				return false
			}
		}
		return true
	})
	if err := cl.Delete(ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: "mine"}}); err != nil {
		t.Fatal(err)
	}
	create("expired", "1s")
	eventually("the deleted and the expired backups gone, data first", func() bool {
		for _, n := range []string{"mine", "expired"} {
			var b testbackup.Backup
			if err := cl.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: n}, &b); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	})
	var left []string
	it := bucket.List(nil)
	for {
		o, err := it.Next(ctx)
		if err != nil {
			break
		}
		left = append(left, o.Key)
	}
	if !slices.Equal(left, keep) {
		t.Errorf("keys left %v, want %v", left, keep)
	}
}

// Objects.Delete carries the UID and resourceVersion it is given: a backup
// changed since, or another of the same name, is not deleted.
func TestObjectsDeleteCarriesPreconditions(t *testing.T) {
	k := testenv.StartKubernetes(t)
	if _, err := testbackup.Install(k.Config); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := testbackup.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(k.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	objs := backups.Objects[*testbackup.Backup](cl, cl)
	b := &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: "b"}, Spec: testbackup.Spec{Prefix: "b/"}}
	if err := cl.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	decided := b.DeepCopyObject().(*testbackup.Backup)
	b.Labels = map[string]string{"changed": "meanwhile"}
	if err := cl.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := objs.Delete(ctx, k.Namespace, "b", decided.UID, decided.ResourceVersion); !apierrors.IsConflict(err) {
		t.Errorf("delete with the resourceVersion decided on: %v, want Conflict", err)
	}
	if err := objs.Delete(ctx, k.Namespace, "b", "another-uid", b.ResourceVersion); !apierrors.IsConflict(err) {
		t.Errorf("delete with another UID: %v, want Conflict", err)
	}
	list, err := objs.List(ctx, k.Namespace)
	if err != nil || len(list) != 1 || list[0].Labels["changed"] != "meanwhile" {
		t.Fatalf("List: %+v, %v; want the changed backup", list, err)
	}
	if err := objs.Delete(ctx, k.Namespace, "b", b.UID, b.ResourceVersion); err != nil {
		t.Errorf("delete with the current UID and resourceVersion: %v", err)
	}
}

// LiveList reads the API server, not the manager's cache: on a started
// manager whose cache holds one namespace, it lists a backup of another
// namespace (which the cache cannot list) and a backup just created.
func TestLiveListReadsTheAPIServer(t *testing.T) {
	k := testenv.StartKubernetes(t)
	if _, err := testbackup.Install(k.Config); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := testbackup.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	other := k.Namespace + "-other"
	if _, err := k.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mgr := k.NewManager(t, scheme)
	testenv.StartManager(t, mgr)
	cl, err := client.New(k.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := mgr.GetClient().List(ctx, &testbackup.BackupList{}, client.InNamespace(other)); err == nil {
		t.Fatalf("the cache lists namespace %s, which it does not hold: the test proves nothing", other)
	}
	got, err := backups.LiveList[*testbackup.Backup](mgr.GetScheme(), mgr.GetAPIReader(), other)(ctx)
	if err != nil || len(got) != 1 || got[0].Name != "b" {
		t.Errorf("LiveList(%s) = %v, %v; want b", other, got, err)
	}
}

// A Collection without a name or a collector is refused before anything is
// added to the manager.
func TestCollectionRefusesWhatItCannotRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    backups.Collection[*testbackup.Backup]
		want string
	}{
		{"no name", backups.Collection[*testbackup.Backup]{}, "Name"},
		{"no collector", backups.Collection[*testbackup.Backup]{Name: "backup-gc"}, "Collector"},
	} {
		if err := tc.c.SetupWithManager(nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}
