package share_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
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

// A pool's next bucket is made from its first member by name, in the
// store beside it; a pool without a member cannot grow; Provision
// creates a member's store bucket, leaves a bucket outside any pool
// alone, and says when its Secret is missing.
func TestGrow(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bucket := func(name, pool, url, secret string) backup {
		return &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: testbackup.Spec{Pool: pool, Prefix: url, Secret: secret}}
	}
	g := share.Grow[backup]{
		Buckets: listed{items: []backup{
			bucket("shared-b", "aws/eu1", "file://"+dir+"/shared-b", ""),
			bucket("shared-a", "aws/eu1", "file://"+dir+"/shared-a", ""),
			bucket("other", "", "file://"+dir+"/other", ""),
		}},
		Member:  func(b backup) string { return b.Spec.Pool },
		Store:   func(b backup) (string, string, string) { return b.Spec.Prefix, "ns", b.Spec.Secret },
		Secrets: secretsNotFound{},
		New: func(first backup, name, url string) backup {
			return bucket(name, first.Spec.Pool, url, first.Spec.Secret)
		},
	}
	next, err := g.NewBucket("aws/eu1", 3)
	if err != nil {
		t.Fatal(err)
	}
	if next.Name != "aws-eu1-3" || next.Spec.Pool != "aws/eu1" || next.Spec.Prefix != "file://"+dir+"/aws-eu1-3" {
		t.Errorf("next bucket %s, pool %q, url %q", next.Name, next.Spec.Pool, next.Spec.Prefix)
	}
	if _, err := g.NewBucket("gcp/eu1", 1); err == nil || !strings.Contains(err.Error(), "no bucket of the pool") {
		t.Errorf("a pool without a member: %v", err)
	}
	if err := g.Provision(ctx, next); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "aws-eu1-3")); err != nil || !fi.IsDir() {
		t.Errorf("store bucket not created: %v", err)
	}
	if err := g.Provision(ctx, bucket("other", "", "file://"+dir+"/other", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "other")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a bucket outside any pool was created: %v", err)
	}
	err = g.Provision(ctx, bucket("aws-eu1-4", "aws/eu1", "s3://aws-eu1-4?region=eu-west-1", "backup-aws"))
	if !errors.Is(err, backupstore.ErrSecretNotFound) || !strings.Contains(err.Error(), "backup-aws") {
		t.Errorf("a missing Secret: %v", err)
	}

	// Deprovision deletes a member's store bucket, its data first, and
	// refuses a bucket outside any pool; a dry run deletes nothing.
	if err := os.WriteFile(filepath.Join(dir, "aws-eu1-3", "backup"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := g.Deprovision(ctx, next, &backupstore.DeleteOptions{DryRun: true})
	if err != nil || len(res.Keys) != 1 || res.Keys[0] != "backup" {
		t.Errorf("Deprovision dry run: %+v, %v; want the one key listed", res, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "aws-eu1-3", "backup")); err != nil {
		t.Errorf("a dry run deleted data: %v", err)
	}
	if _, err := g.Deprovision(ctx, next, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "aws-eu1-3")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("store bucket not deleted: %v", err)
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
}
