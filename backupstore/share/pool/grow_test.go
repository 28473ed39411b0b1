package pool_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// listed lists the buckets it holds; nothing else is called.
type listed struct {
	noObjects
	items []backup
}

func (l listed) List(context.Context, string) ([]backup, error) { return l.items, nil }

type secretsNotFound struct{}

func (secretsNotFound) GetSecret(_ context.Context, _, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

// installationHash is the suffix Grow gives the store names of an
// installation's buckets: the first 8 hex digits of its SHA-256.
func installationHash(installation string) string {
	sum := sha256.Sum256([]byte(installation))
	return hex.EncodeToString(sum[:4])
}

// A pool's next bucket is made from its first member by name, in the
// store beside it, its store name carrying the installation's hash; a
// pool without a member, and a Grow without Installation, cannot grow;
// Provision creates a member's store bucket (with the owner marker when
// the pool created the object), leaves a bucket outside any pool alone,
// and says when its Secret is missing.
func TestGrow(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bucket := func(name, pool, url, secret string) backup {
		return &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: testbackup.Spec{Pool: pool, Prefix: url, Secret: secret}}
	}
	g := pool.Grow[backup]{
		Buckets: listed{items: []backup{
			bucket("shared-b", "aws/eu1", "file://"+dir+"/shared-b", ""),
			bucket("shared-a", "aws/eu1", "file://"+dir+"/shared-a", ""),
			bucket("other", "", "file://"+dir+"/other", ""),
		}},
		Member:  func(b backup) string { return b.Spec.Pool },
		Store:   func(b backup) (string, string, string) { return b.Spec.Prefix, "ns", b.Spec.Secret },
		Secrets: secretsNotFound{},
		New: func(first backup, name, url string) backup {
			b := bucket(name, first.Spec.Pool, url, first.Spec.Secret)
			metav1.SetMetaDataAnnotation(&b.ObjectMeta, pool.AnnotationCreatedBy, first.Spec.Pool) // as Place creates it
			return b
		},
		Installation: "cluster-a",
	}
	noInstallation := g
	noInstallation.Installation = ""
	if _, err := noInstallation.NewBucket("aws/eu1", 3); !errors.Is(err, share.ErrInvalidConfig) || !strings.Contains(err.Error(), "Grow.Installation") {
		t.Errorf("NewBucket without an installation: %v; want ErrInvalidConfig naming Grow.Installation", err)
	}
	next, err := g.NewBucket("aws/eu1", 3)
	if err != nil {
		t.Fatal(err)
	}
	store := "aws-eu1-3-" + installationHash("cluster-a")
	if next.Name != "aws-eu1-3" || next.Spec.Pool != "aws/eu1" || next.Spec.Prefix != "file://"+dir+"/"+store {
		t.Errorf("next bucket %s, pool %q, url %q; want aws-eu1-3 in store bucket %s", next.Name, next.Spec.Pool, next.Spec.Prefix, store)
	}
	if _, err := g.NewBucket("gcp/eu1", 1); err == nil || !strings.Contains(err.Error(), "no bucket of the pool") {
		t.Errorf("a pool without a member: %v", err)
	}
	if err := g.Provision(ctx, next); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, store)); err != nil || !fi.IsDir() {
		t.Errorf("store bucket not created: %v", err)
	}
	marker, err := os.ReadFile(filepath.Join(dir, store, pool.BucketOwnerKey))
	if err != nil || !strings.Contains(string(marker), `"uid":"uid-aws-eu1-3"`) || !strings.Contains(string(marker), `"installation":"cluster-a"`) {
		t.Errorf("owner marker %s: %v", marker, err)
	}
	if err := g.Provision(ctx, next); err != nil {
		t.Errorf("Provision again: %v", err)
	}
	if err := g.Provision(ctx, bucket("other", "", "file://"+dir+"/other", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "other")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a bucket outside any pool was created: %v", err)
	}
	// The administrator's member is created when missing, without a
	// marker: the pool never deletes it.
	admins := bucket("shared-a", "aws/eu1", "file://"+dir+"/shared-a", "")
	if err := g.Provision(ctx, admins); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "shared-a", pool.BucketOwnerKey)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the administrator's store bucket got an owner marker: %v", err)
	}
	err = g.Provision(ctx, bucket("aws-eu1-4", "aws/eu1", "s3://aws-eu1-4?region=eu-west-1", "backup-aws"))
	if !errors.Is(err, backupstore.ErrSecretNotFound) || !strings.Contains(err.Error(), "backup-aws") {
		t.Errorf("a missing Secret: %v", err)
	}

	// Deprovision deletes a member's store bucket that holds its marker
	// alone (refusing one with data: ErrStoreNotEmpty), and refuses a
	// bucket outside any pool and the administrator's member; a dry run
	// deletes nothing.
	if err := os.WriteFile(filepath.Join(dir, store, "backup"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Deprovision(ctx, next, nil); !errors.Is(err, pool.ErrStoreNotEmpty) || !strings.Contains(err.Error(), "(backup)") {
		t.Errorf("Deprovision of a store bucket holding data: %v; want ErrStoreNotEmpty naming it", err)
	}
	if err := os.Remove(filepath.Join(dir, store, "backup")); err != nil {
		t.Fatal(err)
	}
	res, err := g.Deprovision(ctx, next, &backupstore.DeleteOptions{DryRun: true})
	if err != nil || !slices.Equal(res.Keys, []string{pool.BucketOwnerKey}) {
		t.Errorf("Deprovision dry run: %+v, %v; want the marker listed", res, err)
	}
	if _, err := os.Stat(filepath.Join(dir, store, pool.BucketOwnerKey)); err != nil {
		t.Errorf("a dry run deleted the marker: %v", err)
	}
	if _, err := g.Deprovision(ctx, next, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, store)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("store bucket not deleted: %v", err)
	}
	if res, err := g.Deprovision(ctx, next, nil); err != nil || res.Deleted != 0 {
		t.Errorf("Deprovision of a store bucket that is gone: %+v, %v; want nothing deleted, no error", res, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "other"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err = g.Deprovision(ctx, bucket("other", "", "file://"+dir+"/other", ""), nil)
	if !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "other") {
		t.Errorf("Deprovision outside any pool: %v; want refused, naming the bucket", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "other")); err != nil {
		t.Errorf("a bucket outside any pool was deleted: %v", err)
	}
	_, err = g.Deprovision(ctx, admins, nil)
	if !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "shared-a") {
		t.Errorf("Deprovision of the administrator's member: %v; want refused, naming the bucket", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "shared-a")); err != nil {
		t.Errorf("the administrator's store bucket was deleted: %v", err)
	}
}

// On each store (file://, MinIO, fake-gcs-server, Azurite), Grow proves
// a store bucket its object's before it counts it as the pool's: two
// installations with pools of the same name get store names of their own;
// a store bucket that holds another object's owner marker (a name that
// collides, as two installations of one name would pick) and one created
// before owner markers (no marker, a name without the installation's
// hash) are refused by Provision and Deprovision with ErrNotOwned, their
// data kept, until an administrator adopts the latter with the object's
// UID; one named by this installation for the object is taken without a
// marker (a creation whose marker was not written, a deletion interrupted
// after the marker went); two replicas that provision one bucket at once
// both succeed, with one marker. Deprovision deletes a store bucket it
// owns only when it holds nothing but its marker: one that holds any
// other object (an entry's data, a late backup, an adopted bucket's old
// data) is refused with ErrStoreNotEmpty naming it, in a dry run too, and
// the object stays.
func TestGrowOwnsOnlyWhatItCreated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store func(testing.TB) *testenv.BlobStore
	}{{"file", testenv.File}, {"MinIO", testenv.S3}, {"fake-gcs-server", testenv.GCS}, {"Azurite", testenv.Azure}} {
		t.Run(tc.name, func(t *testing.T) {
			testGrowOwnsOnlyWhatItCreated(t, tc.store(t))
		})
	}
}

func testGrowOwnsOnlyWhatItCreated(t *testing.T, store *testenv.BlobStore) {
	ctx := context.Background()
	firstURL := store.URL
	if store.Scheme == "gs" {
		firstURL += "?project=groundskeeper&region=EUROPE-WEST1"
	}
	h := fnv.New32a()
	h.Write([]byte(store.Bucket))
	poolName := fmt.Sprintf("g%08x", h.Sum32())
	first := &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Name: "first", UID: "uid-first"}, Spec: testbackup.Spec{Pool: poolName, Prefix: firstURL}}
	grow := func(installation, uidPrefix string) pool.Grow[backup] {
		return pool.Grow[backup]{
			Buckets: listed{items: []backup{first}}, Secrets: secretsNotFound{}, Installation: installation,
			Member: func(b backup) string { return b.Spec.Pool },
			Store:  func(b backup) (string, string, string) { return b.Spec.Prefix, "", "" },
			New: func(first backup, name, url string) backup {
				return &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uidPrefix + name),
					Annotations: map[string]string{pool.AnnotationCreatedBy: first.Spec.Pool}}, Spec: testbackup.Spec{Pool: first.Spec.Pool, Prefix: url}}
			},
		}
	}
	ga, gb := grow("cluster-a", "uid-a-"), grow("cluster-b", "uid-b-")
	newBucket := func(g pool.Grow[backup], n int) backup {
		t.Helper()
		b, err := g.NewBucket(poolName, n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	open := func(url string) *blob.Bucket {
		t.Helper()
		b, err := backupstore.OpenBucket(ctx, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	holds := func(url, key, want string) {
		t.Helper()
		if data, err := open(url).ReadAll(ctx, key); err != nil || string(data) != want {
			t.Errorf("%s of %s: %q, %v; want %q kept", key, url, data, err, want)
		}
	}
	notEmpty := func(g pool.Grow[backup], b backup, key string) {
		t.Helper()
		for _, dryRun := range []bool{true, false} {
			res, err := g.Deprovision(ctx, b, &backupstore.DeleteOptions{DryRun: dryRun})
			if !errors.Is(err, pool.ErrStoreNotEmpty) || !strings.Contains(err.Error(), key) || strings.Contains(err.Error(), pool.BucketOwnerKey+",") {
				t.Errorf("Deprovision (dry run %t) of %s holding %s: %+v, %v; want ErrStoreNotEmpty naming %s alone", dryRun, b.Spec.Prefix, key, res, err, key)
			}
		}
	}
	refused := func(g pool.Grow[backup], b backup, what string) {
		t.Helper()
		if err := g.Provision(ctx, b); !errors.Is(err, pool.ErrNotOwned) {
			t.Errorf("Provision of %s: %v; want ErrNotOwned", what, err)
		}
		if res, err := g.Deprovision(ctx, b, nil); !errors.Is(err, pool.ErrNotOwned) {
			t.Errorf("Deprovision of %s: %+v, %v; want ErrNotOwned", what, res, err)
		}
	}

	// Pools of one name in two installations: store names of their own.
	a2, b2 := newBucket(ga, 2), newBucket(gb, 2)
	if a2.Name != b2.Name || a2.Spec.Prefix == b2.Spec.Prefix {
		t.Fatalf("installation a's %s in %s, b's %s in %s: want one object name, two store buckets", a2.Name, a2.Spec.Prefix, b2.Name, b2.Spec.Prefix)
	}
	for _, x := range []struct {
		g pool.Grow[backup]
		b backup
	}{{ga, a2}, {gb, b2}} {
		if err := x.g.Provision(ctx, x.b); err != nil {
			t.Fatalf("Provision of %s: %v", x.b.Spec.Prefix, err)
		}
	}
	if err := open(a2.Spec.Prefix).WriteAll(ctx, "e1/backup", []byte("a's"), nil); err != nil {
		t.Fatal(err)
	}

	// b's p-2 named like a's (the old names, or one installation name in
	// two clusters): a's marker refuses it.
	collides := b2.DeepCopyObject().(backup)
	collides.Spec.Prefix = a2.Spec.Prefix
	refused(gb, collides, "a store bucket with another's marker")
	holds(a2.Spec.Prefix, "e1/backup", "a's")

	// A store bucket a pool created before owner markers, with its data.
	old, err := backupstore.BucketURL(firstURL, poolName+"-9")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := backupstore.CreateBucket(ctx, old, nil); err != nil {
		t.Fatal(err)
	}
	if err := open(old).WriteAll(ctx, "e9/backup", []byte("old"), nil); err != nil {
		t.Fatal(err)
	}
	a9 := newBucket(ga, 9)
	a9.Spec.Prefix = old
	refused(ga, a9, "a store bucket without a marker")
	metav1.SetMetaDataAnnotation(&a9.ObjectMeta, pool.AnnotationAdoptStore, "true")
	refused(ga, a9, "a store bucket adopted with another value than the UID")
	holds(old, "e9/backup", "old")
	metav1.SetMetaDataAnnotation(&a9.ObjectMeta, pool.AnnotationAdoptStore, string(a9.UID))
	if err := ga.Provision(ctx, a9); err != nil {
		t.Errorf("Provision of an adopted store bucket: %v", err)
	}
	// Adopted, the store bucket is the object's; its old data is no
	// entry's of the pool, and is not deleted with it.
	notEmpty(ga, a9, "e9/backup")
	holds(old, "e9/backup", "old")
	if err := open(old).Delete(ctx, "e9/backup"); err != nil { // by its owner
		t.Fatal(err)
	}
	if _, err := ga.Deprovision(ctx, a9, nil); err != nil {
		t.Errorf("Deprovision of an adopted store bucket: %v", err)
	}
	if b, err := backupstore.OpenBucket(ctx, old, nil); err == nil { // file://: no directory, no bucket to open
		if ok, err := b.IsAccessible(ctx); err != nil || ok {
			t.Errorf("the adopted store bucket %s: there %t, %v; want it deleted", old, ok, err)
		}
		b.Close()
	}

	// Named by this installation for the object, without a marker: a
	// creation whose marker was not written (a restart between the two
	// requests) is taken by Provision, which writes it; a deletion
	// interrupted after the marker went is finished by Deprovision.
	a3, a4 := newBucket(ga, 3), newBucket(ga, 4)
	for _, b := range []backup{a3, a4} {
		if _, err := backupstore.CreateBucket(ctx, b.Spec.Prefix, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := ga.Provision(ctx, a3); err != nil {
		t.Errorf("Provision of this installation's store bucket without a marker: %v", err)
	}
	if ok, err := open(a3.Spec.Prefix).Exists(ctx, pool.BucketOwnerKey); err != nil || !ok {
		t.Errorf("marker of %s after Provision: there %t, %v", a3.Spec.Prefix, ok, err)
	}
	if err := open(a4.Spec.Prefix).WriteAll(ctx, "late/backup", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	notEmpty(ga, a4, "late/backup") // not the pool's, with or without a marker
	holds(a4.Spec.Prefix, "late/backup", "x")
	if err := open(a4.Spec.Prefix).Delete(ctx, "late/backup"); err != nil {
		t.Fatal(err)
	}
	if res, err := ga.Deprovision(ctx, a4, nil); err != nil || res.Deleted != 0 {
		t.Errorf("Deprovision of this installation's empty store bucket whose marker went: %+v, %v; want it deleted", res, err)
	}

	// Two replicas provision a new bucket at once.
	a5 := newBucket(ga, 5)
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- ga.Provision(ctx, a5) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("Provision by two replicas at once: %v", err)
		}
	}
	if marker, err := open(a5.Spec.Prefix).ReadAll(ctx, pool.BucketOwnerKey); err != nil || !strings.Contains(string(marker), string(a5.UID)) {
		t.Errorf("marker of %s: %s, %v", a5.Spec.Prefix, marker, err)
	}

	// a deletes its own p-2 once its entry's data went; b's stays.
	notEmpty(ga, a2, "e1/backup")
	if err := open(a2.Spec.Prefix).Delete(ctx, "e1/backup"); err != nil { // e1's collector
		t.Fatal(err)
	}
	if res, err := ga.Deprovision(ctx, a2, nil); err != nil || res.Deleted != 1 {
		t.Errorf("Deprovision of a's own p-2: %+v, %v; want its marker deleted", res, err)
	}
	if ok, err := open(b2.Spec.Prefix).Exists(ctx, pool.BucketOwnerKey); err != nil || !ok {
		t.Errorf("b's p-2 after a's deletion: marker there %t, %v; want it kept", ok, err)
	}
}
