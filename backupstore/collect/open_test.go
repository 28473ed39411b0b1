package collect_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
)

type noSecrets struct{}

func (noSecrets) GetSecret(_ context.Context, _, name string) (*corev1.Secret, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

type oneBackup struct{ b *Backup }

func (o oneBackup) List(context.Context, string) ([]*Backup, error)      { return []*Backup{o.b}, nil }
func (o oneBackup) Get(context.Context, string, string) (*Backup, error) { return o.b, nil }
func (oneBackup) UpdateStatus(context.Context, *Backup) error            { return nil }
func (oneBackup) Update(context.Context, *Backup) error                  { return nil }
func (oneBackup) Delete(context.Context, string, string, types.UID, string) error {
	return errors.New("not used")
}

// OpenLocation opens a location other than the backup's own, with the
// Collector's Open; its missing Secret is an error naming the field.
func TestOpenLocation(t *testing.T) {
	ctx := context.Background()
	b := &Backup{}
	b.Name = "shoot--a"
	opened := ""
	c, err := collect.New(collect.Config[*Backup]{Objects: oneBackup{b}, Secrets: noSecrets{}, Finalizer: &collect.Finalizer[*Backup]{Name: "f"},
		Location: func(context.Context, *Backup) (collect.Location, error) { return collect.Location{}, nil },
		Open: func(ctx context.Context, url string, creds *backupstore.Credentials) (*blob.Bucket, func() error, error) {
			opened = url
			bucket, err := backupstore.OpenBucket(ctx, url, creds)
			if err != nil {
				return nil, nil, err
			}
			return bucket, bucket.Close, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.OpenLocation(ctx, b, collect.Location{URL: "s3://legacy?region=x", Secret: "gone", SecretNamespace: "ns", SecretField: "spec.migrateFrom.secretRef"})
	if err == nil || !strings.Contains(err.Error(), `spec.migrateFrom.secretRef "gone" not found`) || opened != "" {
		t.Errorf("missing Secret: %v (opened %q); want an error naming spec.migrateFrom.secretRef, nothing opened", err, opened)
	}
	bucket, release, err := c.OpenLocation(ctx, b, collect.Location{URL: "mem://"})
	if err != nil || opened != "mem://" {
		t.Fatalf("mem://: %v, opened %q", err, opened)
	}
	if err := bucket.WriteAll(ctx, "k", []byte("v"), nil); err != nil {
		t.Error(err)
	}
	if err := release(); err != nil {
		t.Error(err)
	}
}
