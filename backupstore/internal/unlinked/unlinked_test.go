package unlinked_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/blob/s3blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
)

const s3Import = `import _ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"`

// Without its provider, OpenBucket refuses a cloud scheme before any
// request, and says which import to add.
func TestOpenBucketNamesTheMissingImport(t *testing.T) {
	creds := &backupstore.Credentials{AccessKeyID: "id", SecretAccessKey: "secret", Region: "us-east-1",
		ServiceAccountJSON: []byte("{}"), StorageAccount: "account", StorageKey: "a2V5"}
	for scheme, pkg := range map[string]string{
		"s3":     "backupstore/s3store",
		"gs":     "backupstore/gcsstore",
		"azblob": "backupstore/azurestore",
	} {
		for _, c := range []*backupstore.Credentials{nil, creds} {
			_, err := backupstore.OpenBucket(context.Background(), scheme+"://backups?prefix=a/", c)
			if !errors.Is(err, backupstore.ErrUnsupportedScheme) || !errors.Is(err, backupstore.ErrInvalidConfig) {
				t.Errorf("OpenBucket(%s://, credentials: %t) = %v, want ErrUnsupportedScheme and ErrInvalidConfig", scheme, c != nil, err)
				continue
			}
			if want := `import _ "github.com/groundskeeper-io/groundskeeper/` + pkg + `"`; !strings.Contains(err.Error(), want) {
				t.Errorf("OpenBucket(%s://): %q does not say %s", scheme, err, want)
			}
		}
	}
}

// s3Bucket opens an S3 bucket with gocloud alone, against a server that
// counts the requests it gets and answers each with a 500.
func s3Bucket(t *testing.T) (*blob.Bucket, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: awscreds.NewStaticCredentialsProvider("id", "secret", "")})
	b, err := s3blob.OpenBucket(context.Background(), client, "backups", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, &requests
}

// A bucket of gocloud's S3 driver, opened without backupstore: without
// s3store, DeletePrefix would delete it one key at a time and skip its
// versions and Object Lock, CopyBackups would read S3's errors as gocloud
// does, and ExpirePrefix would call S3 unsupported. Each refuses before any
// request, naming the import.
func TestAnS3BucketWithoutItsProviderIsRefused(t *testing.T) {
	ctx := context.Background()
	b, requests := s3Bucket(t)
	dst, _ := backupstore.OpenBucket(ctx, "mem://", nil)
	defer dst.Close()
	for name, call := range map[string]func() error{
		"DeletePrefix": func() error { _, err := backupstore.DeletePrefix(ctx, b, "backups/a/", nil); return err },
		"DeletePrefix, dry run": func() error {
			_, err := backupstore.DeletePrefix(ctx, b, "backups/a/", &backupstore.DeleteOptions{DryRun: true})
			return err
		},
		"CopyBackups from it": func() error {
			_, err := backupstore.CopyBackups(ctx, b, dst, &backupstore.CopyOptions{SourcePrefix: "backups/a/"})
			return err
		},
		"CopyBackups into it": func() error {
			_, err := backupstore.CopyBackups(ctx, dst, b, &backupstore.CopyOptions{TargetPrefix: "backups/a/"})
			return err
		},
		"ExpirePrefix": func() error {
			_, err := backupstore.ExpirePrefix(ctx, b, "backups/a/", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), nil)
			return err
		},
		"PruneExpiry": func() error { _, err := backupstore.PruneExpiry(ctx, b, nil); return err },
	} {
		err := call()
		if !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), s3Import) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming %s", name, err, s3Import)
		}
		if errors.Is(err, backupstore.ErrExpiryUnsupported) {
			t.Errorf("%s: %v: an S3 bucket is called unsupported", name, err)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the store", n)
	}
}

// The stores that need no provider work as before: buckets OpenBucket
// opened (mem://, file://) and fileblob buckets opened with gocloud. A
// memblob bucket opened with gocloud cannot be told from an S3 one while
// gocloud's S3 driver is linked, and is refused: open it with OpenBucket.
func TestStoresWithoutProvidersNeedNone(t *testing.T) {
	ctx := context.Background()
	mem, err := backupstore.OpenBucket(ctx, "mem://", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	file, err := backupstore.OpenBucket(ctx, "file://"+t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	fb, err := fileblob.OpenBucket(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	for name, b := range map[string]*blob.Bucket{"mem:// by OpenBucket": mem, "file:// by OpenBucket": file, "fileblob": fb} {
		if err := b.WriteAll(ctx, "backups/a/1", []byte("data"), nil); err != nil {
			t.Fatal(err)
		}
		res, err := backupstore.DeletePrefix(ctx, b, "backups/a/", nil)
		if err != nil || res.Deleted != 1 {
			t.Errorf("%s: DeletePrefix = %+v, %v; want 1 deleted", name, res, err)
		}
	}

	mb := memblob.OpenBucket(nil)
	defer mb.Close()
	_, err = backupstore.DeletePrefix(ctx, mb, "backups/a/", nil)
	if !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), s3Import) {
		t.Errorf("memblob opened with gocloud: %v, want ErrInvalidConfig naming %s", err, s3Import)
	}
}
