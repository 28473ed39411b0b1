package backupstore_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// CreateBucket creates a new bucket on MinIO and fake-gcs-server and a new
// container on Azurite through the provider's API, which then takes
// writes, and says it created it; a second creation of the same bucket
// succeeds (a retried growth of a pool) and says the bucket existed, as
// does a creation of a bucket someone else made (the store's own bucket
// of the test environment, holding another's data): "already exists" is
// never reported as created. gs without a project or a location is
// refused before any request, naming the parameter.
func TestCreateBucket(t *testing.T) {
	ctx := context.Background()
	for _, store := range []*testenv.BlobStore{testenv.S3(t), testenv.GCS(t), testenv.Azure(t)} {
		t.Run(store.Scheme, func(t *testing.T) {
			name := store.Bucket + "-new"
			url := strings.Replace(store.URL, store.Bucket, name, 1)
			params := ""
			if store.Scheme == "gs" {
				params = "?project=groundskeeper&region=EUROPE-WEST1"
			}
			url += params
			if b, err := backupstore.OpenBucket(ctx, url, nil); err == nil {
				if err := b.WriteAll(ctx, "before", []byte("x"), nil); err == nil {
					t.Fatalf("%s takes writes before it is created", url)
				}
				b.Close()
			}
			for i, want := range []bool{true, false} {
				created, err := backupstore.CreateBucket(ctx, url, nil)
				if err != nil || created != want {
					t.Fatalf("create %s (%d): created %t, %v; want created %t", url, i+1, created, err, want)
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

			other := store.Open(t)
			if err := other.WriteAll(ctx, "another/cluster", []byte("theirs"), nil); err != nil {
				t.Fatal(err)
			}
			if created, err := backupstore.CreateBucket(ctx, store.URL+params, nil); err != nil || created {
				t.Errorf("create %s, made by someone else: created %t, %v; want it reported as existing", store.URL, created, err)
			}
			if data, err := other.ReadAll(ctx, "another/cluster"); err != nil || string(data) != "theirs" {
				t.Errorf("the existing bucket's object after the creation: %q, %v", data, err)
			}
		})
	}
	gcs := testenv.GCS(t)
	for _, tc := range []struct{ url, want string }{
		{"gs://" + gcs.Bucket + "-no-project?region=EU", "project="},
		{"gs://" + gcs.Bucket + "-no-region?project=groundskeeper", "region="},
	} {
		_, err := backupstore.CreateBucket(ctx, tc.url, nil)
		if !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrInvalidConfig naming %s", tc.url, err, tc.want)
		}
		if exists := gcsBucketExists(t, gcs, strings.TrimPrefix(strings.Split(tc.url, "?")[0], "gs://")); exists {
			t.Errorf("%s: the refused bucket exists", tc.url)
		}
	}
}

// CreateBucket on file:// creates the directory with its parents and says
// so; a directory that exists (made by anyone) is reported as existing,
// its files kept; a file in its place is an error. mem:// has nothing to
// create: every mem:// bucket is new.
func TestCreateBucketLocal(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "pools", "pool-2")
	for i, want := range []bool{true, false} {
		created, err := backupstore.CreateBucket(ctx, "file://"+dir, nil)
		if err != nil || created != want {
			t.Fatalf("create %s (%d): created %t, %v; want %t", dir, i+1, created, err, want)
		}
	}
	theirs := filepath.Join(filepath.Dir(dir), "theirs")
	if err := os.MkdirAll(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(theirs, "backup"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if created, err := backupstore.CreateBucket(ctx, "file://"+theirs+"/", nil); err != nil || created {
		t.Errorf("create an existing directory: created %t, %v; want it reported as existing", created, err)
	}
	if _, err := os.Stat(filepath.Join(theirs, "backup")); err != nil {
		t.Errorf("the existing directory's file: %v", err)
	}
	file := filepath.Join(filepath.Dir(dir), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if created, err := backupstore.CreateBucket(ctx, "file://"+file, nil); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("create over a file: created %t, %v; want an error", created, err)
	}
	if created, err := backupstore.CreateBucket(ctx, "mem://", nil); err != nil || !created {
		t.Errorf("mem://: created %t, %v; want created", created, err)
	}
}

// gcsBucketExists asks the fake-gcs-server of store whether it has bucket
// name.
func gcsBucketExists(t *testing.T, store *testenv.BlobStore, name string) bool {
	t.Helper()
	resp, err := http.Get(store.Endpoint + "/storage/v1/b/" + name)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
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
