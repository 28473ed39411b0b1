package backupstore_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// DeleteBucket on MinIO, fake-gcs-server and Azurite: a dry run lists
// every object and deletes nothing; the deletion empties the bucket and
// deletes it (it takes no writes then); a second deletion, of a bucket
// that is gone, succeeds.
func TestDeleteBucket(t *testing.T) {
	ctx := context.Background()
	for _, store := range []*testenv.BlobStore{testenv.S3(t), testenv.GCS(t), testenv.Azure(t)} {
		t.Run(store.Scheme, func(t *testing.T) {
			name := store.Bucket + "-gone"
			url := strings.Replace(store.URL, store.Bucket, name, 1)
			if store.Scheme == "gs" {
				url += "?project=groundskeeper&region=EUROPE-WEST1"
			}
			creds := credsFor(store.Scheme)
			if _, err := backupstore.CreateBucket(ctx, url, creds); err != nil {
				t.Fatal(err)
			}
			keys := []string{"a/1", "a/2", "b/1", "top"}
			put(t, openURL(t, url, creds), keys, 10)

			res, err := backupstore.DeleteBucket(ctx, url, creds, &backupstore.DeleteOptions{DryRun: true})
			if err != nil || !slices.Equal(res.Keys, keys) || res.Bytes != 40 {
				t.Fatalf("dry run: keys %v, %d bytes, %v; want %v, 40 bytes", res.Keys, res.Bytes, err, keys)
			}
			if got := snapshot(t, openURL(t, url, creds), ""); len(got) != len(keys) {
				t.Fatalf("after the dry run: %d objects, want %d", len(got), len(keys))
			}
			res, err = backupstore.DeleteBucket(ctx, url, creds, nil)
			if err != nil || res.Deleted != 4 {
				t.Fatalf("delete: %d deleted, %v", res.Deleted, err)
			}
			b := openURL(t, url, creds)
			if err := b.WriteAll(ctx, "after", []byte("x"), nil); err == nil {
				t.Fatalf("the deleted %s takes writes", url)
			}
			res, err = backupstore.DeleteBucket(ctx, url, creds, nil)
			if err != nil || res.Deleted != 0 {
				t.Errorf("second delete: %d deleted, %v; want success", res.Deleted, err)
			}
		})
	}
}

// DeleteBucket on MinIO, fake-gcs-server and Azurite keeps a bucket into
// which an object was written after its data was deleted, right before the
// bucket's own deletion (at the end of DeletePrefix, whose last Progress
// call returns before it does): the deletion fails, and the object and the
// bucket are there. S3 and GCS refuse to delete a bucket that is not
// empty; Azure would take the container with it, so DeleteBucket lists it
// again first.
func TestDeleteBucketKeepsAnObjectWrittenMeanwhile(t *testing.T) {
	ctx := context.Background()
	for _, store := range []*testenv.BlobStore{testenv.S3(t), testenv.GCS(t), testenv.Azure(t)} {
		t.Run(store.Scheme, func(t *testing.T) {
			name := store.Bucket + "-late"
			url := strings.Replace(store.URL, store.Bucket, name, 1)
			if store.Scheme == "gs" {
				url += "?project=groundskeeper&region=EUROPE-WEST1"
			}
			creds := credsFor(store.Scheme)
			if _, err := backupstore.CreateBucket(ctx, url, creds); err != nil {
				t.Fatal(err)
			}
			b := openURL(t, url, creds)
			put(t, b, []string{"a/1", "a/2"}, 10)
			var wrote error
			written := false
			_, err := backupstore.DeleteBucket(ctx, url, creds, &backupstore.DeleteOptions{Progress: func(p backupstore.DeleteProgress) {
				if p.Done && !written {
					written = true
					wrote = b.WriteAll(ctx, "late/backup", []byte("the newest"), nil)
				}
			}})
			if wrote != nil || !written {
				t.Fatalf("the write after the data's deletion: %v (written %t)", wrote, written)
			}
			if err == nil {
				t.Fatalf("DeleteBucket of a bucket written into meanwhile: nil; want it refused")
			}
			t.Log(err)
			if got, err := b.ReadAll(ctx, "late/backup"); err != nil || string(got) != "the newest" {
				t.Errorf("late/backup after the refused deletion: %q, %v; want it kept", got, err)
			}
			if _, err := b.ReadAll(ctx, "a/1"); err == nil {
				t.Errorf("a/1, listed before, is still there")
			}
		})
	}
}

// DeleteBucket on file:// removes the directory with its files and
// subdirectories; a second call and mem:// succeed; a URL with prefix=
// and KeepNoncurrentVersions are refused before any request.
func TestDeleteBucketLocalAndRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir() + "/bucket"
	url := "file://" + dir
	if _, err := backupstore.CreateBucket(ctx, url, nil); err != nil {
		t.Fatal(err)
	}
	put(t, openURL(t, url, nil), []string{"x/y/1", "x/2", "3"}, 5)
	for i := range 2 {
		if _, err := backupstore.DeleteBucket(ctx, url, nil, nil); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("delete %d: %s: %v; want it gone", i+1, dir, err)
		}
	}
	if _, err := backupstore.DeleteBucket(ctx, "mem://", nil, nil); err != nil {
		t.Errorf("mem: %v", err)
	}
	for _, tc := range []struct {
		url  string
		opts *backupstore.DeleteOptions
		want string
	}{
		{"file://" + dir + "?prefix=a/", nil, "prefix="},
		{"file://" + dir, &backupstore.DeleteOptions{KeepNoncurrentVersions: true}, "KeepNoncurrentVersions"},
	} {
		_, err := backupstore.DeleteBucket(ctx, tc.url, nil, tc.opts)
		if !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrInvalidConfig naming %s", tc.url, err, tc.want)
		}
	}
}

// A MinIO bucket with Object Lock: a version under governance retention is
// not forced; DeleteBucket deletes everything else, keeps the bucket and
// returns ErrRetained with the retain-until as RetryAt; once that has
// passed, it deletes the bucket.
func TestDeleteBucketObjectLock(t *testing.T) {
	ctx := context.Background()
	s := testenv.S3With(t, testenv.BucketOptions{ObjectLock: true})
	b := openStore(t, s)
	put(t, b, []string{"free/1", "free/2"}, 8)
	until := time.Now().Add(12 * time.Second).Truncate(time.Second)
	lockKey(t, b, s3Client(t, b), s.Bucket, "locked/1", s3types.ObjectLockRetentionModeGovernance, until, false)

	res, err := backupstore.DeleteBucket(ctx, s.URL, credsFor("s3"), nil)
	var re *backupstore.RetainedError
	if !errors.Is(err, backupstore.ErrRetained) || !errors.As(err, &re) {
		t.Fatalf("delete: %v; want ErrRetained", err)
	}
	if !re.RetryAt.Equal(until) || len(re.Objects) != 1 || re.Objects[0].Key != "locked/1" {
		t.Errorf("retained %+v, retry at %s; want locked/1 until %s", re.Objects, re.RetryAt, until)
	}
	if res.Deleted != 2 {
		t.Errorf("%d deleted, want the 2 free objects", res.Deleted)
	}
	if err := b.WriteAll(ctx, "still-there", []byte("x"), nil); err != nil {
		t.Errorf("the bucket under retention is gone: %v", err)
	}
	time.Sleep(time.Until(re.RetryAt) + time.Second)
	if _, err := backupstore.DeleteBucket(ctx, s.URL, credsFor("s3"), nil); err != nil {
		t.Fatalf("delete after RetryAt: %v", err)
	}
	if err := b.WriteAll(ctx, "after", []byte("x"), nil); err == nil {
		t.Error("the deleted bucket takes writes")
	}
}
