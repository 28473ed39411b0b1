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

func TestBucketURL(t *testing.T) {
	for _, tc := range []struct{ url, name, want, wantErr string }{
		{"s3://shared-1?region=eu-west-1&endpoint=http://127.0.0.1:9000&use_path_style=true", "aws-eu-west-1-2",
			"s3://aws-eu-west-1-2?region=eu-west-1&endpoint=http://127.0.0.1:9000&use_path_style=true", ""},
		{"azblob://backups?protocol=http", "azure-westeurope-3", "azblob://azure-westeurope-3?protocol=http", ""},
		{"gs://backups", "gcp-2", "gs://gcp-2", ""},
		{"file:///var/backups/shared-1", "pool-2", "file:///var/backups/pool-2", ""},
		{"file:///var/backups/shared-1/", "pool-2", "file:///var/backups/pool-2", ""},
		{"mem://", "pool-2", "mem://pool-2", ""},
		{"mem://pool-1", "pool-2", "mem://pool-2", ""},
		{"s3://?region=x", "b", "", "names no bucket"},
		{"file:///", "b", "", "names no directory"},
		{"s3://a", "b/c", "", `bucket name "b/c"`},
		{"s3://a", "", "", `bucket name ""`},
		{"ftp://a", "b", "", "ftp"},
	} {
		got, err := backupstore.BucketURL(tc.url, tc.name)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("BucketURL(%q, %q) = %q, %v; want an error with %q", tc.url, tc.name, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("BucketURL(%q, %q) = %q, %v; want %q", tc.url, tc.name, got, err, tc.want)
		}
	}
}
