package backups_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// A shared bucket on a started manager, on MinIO and on Azurite: the
// bucket resource is a ConfigMap (data: url, limit), the entries are
// testbackup Backups naming it in spec.bucket. With a limit of 2, two of
// three entries are admitted (a marker under each prefix) and the third is
// refused with BucketFull; deleting an admitted entry deletes its data and
// admits the waiting one; a deleted bucket admits no new entry and stays
// while entries name it; it goes with its last entry.
func TestShareOnAManager(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(testing.TB) *testenv.BlobStore
		creds func(*testenv.BlobStore) map[string]string
	}{
		{"MinIO", testenv.S3, func(*testenv.BlobStore) map[string]string {
			return map[string]string{backupstore.SecretKeyAccessKeyID: testenv.S3AccessKeyID, backupstore.SecretKeySecretAccessKey: testenv.S3SecretAccessKey}
		}},
		{"Azurite", testenv.Azure, func(*testenv.BlobStore) map[string]string {
			return map[string]string{backupstore.SecretKeyStorageAccount: testenv.AzureAccount, backupstore.SecretKeyStorageKey: testenv.AzureAccountKey}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := tc.store(t)
			testShare(t, "share-"+tc.name, store, tc.creds(store))
		})
	}
}

const (
	entryFinalizer  = "share.groundskeeper.example.com/data"
	bucketFinalizer = "share.groundskeeper.example.com/entries"
)

func testShare(t *testing.T, name string, store *testenv.BlobStore, creds map[string]string) {
	k := testenv.StartKubernetes(t)
	if _, err := testbackup.Install(k.Config); err != nil {
		t.Fatal(err)
	}
	data := store.Open(t)
	ctx := context.Background()
	if _, err := k.Client.CoreV1().Secrets(k.Namespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: creds}, metav1.CreateOptions{}); err != nil {
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
	entries := backups.Objects[*testbackup.Backup](mgr.GetClient(), mgr.GetAPIReader())
	buckets := backups.Objects[*corev1.ConfigMap](mgr.GetClient(), mgr.GetAPIReader())
	c, err := collect.New(collect.Config[*testbackup.Backup]{
		Objects: entries, Secrets: crt.Secrets(mgr.GetAPIReader()), Finalizer: &collect.Finalizer[*testbackup.Backup]{Name: entryFinalizer},
		Location: func(ctx context.Context, b *testbackup.Backup) (collect.Location, error) {
			cm, err := buckets.Get(ctx, b.Namespace, b.Spec.Bucket)
			if err != nil {
				return collect.Location{}, err
			}
			prefix, err := share.PrefixOf(b)
			return collect.Location{URL: cm.Data["url"], Prefix: prefix, Secret: "creds"}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := share.New(share.Config[*testbackup.Backup, *corev1.ConfigMap]{
		Entries: entries, Buckets: buckets, Collector: c,
		Bucket: func(b *testbackup.Backup) (string, string) { return b.Namespace, b.Spec.Bucket },
		Limit: func(cm *corev1.ConfigMap) int {
			n, _ := strconv.Atoi(cm.Data["limit"])
			return n
		},
		Prefix:          func(b *testbackup.Backup) *string { return &b.Status.Prefix },
		Marker:          func(b *testbackup.Backup) []byte { return []byte(b.UID) },
		MarkerKey:       "entry",
		BucketFinalizer: bucketFinalizer,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (backups.Sharing[*testbackup.Backup, *corev1.ConfigMap]{Name: name, Reconciler: s}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	cl, err := client.New(k.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: "shared"},
		Data: map[string]string{"url": store.URL, "limit": "2"}}
	if err := cl.Create(ctx, cm); err != nil {
		t.Fatal(err)
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
	get := func(name string) *testbackup.Backup {
		var b testbackup.Backup
		if err := cl.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: name}, &b); err != nil {
			return nil
		}
		return &b
	}
	admitted := func(name string) (bool, string) {
		b := get(name)
		if b == nil {
			return false, "gone"
		}
		c := meta.FindStatusCondition(b.Status.Conditions, share.ConditionAdmitted)
		if c == nil {
			return false, ""
		}
		return c.Status == metav1.ConditionTrue && b.Status.Prefix == b.Namespace+"."+b.Name+"/", c.Reason
	}
	for _, n := range []string{"e1", "e2"} {
		if err := cl.Create(ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: n}, Spec: testbackup.Spec{Bucket: "shared"}}); err != nil {
			t.Fatal(err)
		}
		eventually(n+" admitted", func() bool { ok, _ := admitted(n); return ok })
	}
	if err := cl.Create(ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: "e3"}, Spec: testbackup.Spec{Bucket: "shared"}}); err != nil {
		t.Fatal(err)
	}
	eventually("e3 refused", func() bool { _, r := admitted("e3"); return r == share.ReasonBucketFull })
	for _, n := range []string{"e1", "e2"} {
		if err := data.WriteAll(ctx, k.Namespace+"."+n+"/backup", []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
		if ok, _ := data.Exists(ctx, k.Namespace+"."+n+"/entry"); !ok {
			t.Errorf("no marker under %s/", n)
		}
	}
	if ok, _ := data.Exists(ctx, k.Namespace+".e3/entry"); ok {
		t.Error("a marker under the refused e3/")
	}

	// e1 goes, its data first; e3 takes its place.
	if err := cl.Delete(ctx, get("e1")); err != nil {
		t.Fatal(err)
	}
	eventually("e1 gone", func() bool { return get("e1") == nil })
	if ok, _ := data.Exists(ctx, k.Namespace+".e1/backup"); ok {
		t.Error("e1's data left after e1 went")
	}
	eventually("e3 admitted in e1's place", func() bool { ok, _ := admitted("e3"); return ok })

	// The bucket resource is deleted: it stays while entries name it, and
	// admits no new one.
	eventually("bucket finalizer", func() bool {
		var got corev1.ConfigMap
		return cl.Get(ctx, client.ObjectKeyFromObject(cm), &got) == nil && slices.Contains(got.Finalizers, bucketFinalizer)
	})
	if err := cl.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the bucket controller had its chance
	var got corev1.ConfigMap
	if err := cl.Get(ctx, client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatalf("the bucket resource went while e2 and e3 name it: %v", err)
	}
	if err := cl.Create(ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: "e4"}, Spec: testbackup.Spec{Bucket: "shared"}}); err != nil {
		t.Fatal(err)
	}
	eventually("e4 refused, the bucket being deleted", func() bool { _, r := admitted("e4"); return r == share.ReasonBucketDeleting })
	if err := cl.Get(ctx, client.ObjectKeyFromObject(cm), &got); err != nil {
		t.Fatalf("the bucket resource went while e2, e3 and e4 name it: %v", err)
	}
	for _, n := range []string{"e2", "e3", "e4"} {
		if err := cl.Delete(ctx, get(n)); err != nil {
			t.Fatal(err)
		}
	}
	eventually("the bucket resource gone with its last entry", func() bool {
		return apierrors.IsNotFound(cl.Get(ctx, client.ObjectKeyFromObject(cm), &got))
	})
	if ok, _ := data.Exists(ctx, k.Namespace+".e2/backup"); ok {
		t.Error("e2's data left after e2 went")
	}
}
