package backupstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// CreateBucket creates a new bucket on MinIO and a new container on
// Azurite through the provider's API, which then takes writes; a second
// creation of the same bucket succeeds (a retried growth of a pool); gs
// refuses clearly.
func TestCreateBucket(t *testing.T) {
	ctx := context.Background()
	for _, store := range []*testenv.BlobStore{testenv.S3(t), testenv.Azure(t)} {
		t.Run(store.Scheme, func(t *testing.T) {
			name := store.Bucket + "-new"
			url := strings.Replace(store.URL, store.Bucket, name, 1)
			if b, err := backupstore.OpenBucket(ctx, url, nil); err == nil {
				if err := b.WriteAll(ctx, "before", []byte("x"), nil); err == nil {
					t.Fatalf("%s takes writes before it is created", url)
				}
				b.Close()
			}
			for i := range 2 {
				if err := backupstore.CreateBucket(ctx, url, nil); err != nil {
					t.Fatalf("create %s (%d): %v", url, i+1, err)
				}
			}
			b, err := backupstore.OpenBucket(ctx, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if err := b.WriteAll(ctx, "after", []byte("x"), nil); err != nil {
				t.Fatalf("write to the created %s: %v", url, err)
			}
		})
	}
	err := backupstore.CreateBucket(ctx, "gs://new-bucket", nil)
	if !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "cannot create") {
		t.Errorf("gs: %v; want ErrInvalidConfig saying it cannot create", err)
	}
}
