package backupstore_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// openStore opens a test bucket the way a controller would: through
// OpenBucket with credentials (for S3 and Azure), so that the tests exercise
// the clients built here and not only gocloud's URL openers.
func openStore(t testing.TB, s *testenv.BlobStore) *blob.Bucket {
	t.Helper()
	return openURL(t, s.URL, credsFor(s.Scheme))
}

func openURL(t testing.TB, url string, creds *backupstore.Credentials) *blob.Bucket {
	t.Helper()
	b, err := backupstore.OpenBucket(context.Background(), url, creds)
	if err != nil {
		t.Fatalf("OpenBucket(%s): %v", url, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func credsFor(scheme string) *backupstore.Credentials {
	switch scheme {
	case "s3":
		return &backupstore.Credentials{AccessKeyID: testenv.S3AccessKeyID, SecretAccessKey: testenv.S3SecretAccessKey, Region: testenv.S3Region}
	case "azblob":
		return &backupstore.Credentials{StorageAccount: testenv.AzureAccount, StorageKey: testenv.AzureAccountKey}
	}
	return nil
}

// content is the deterministic body of the object key.
func content(key string, size int) []byte {
	b := bytes.Repeat([]byte(key+"|"), size/(len(key)+1)+1)
	return b[:size]
}

// fill writes n objects prefix+"%05d" of size bytes each, 32 at a time, and
// returns their keys.
func fill(t testing.TB, b *blob.Bucket, prefix string, n, size int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	put(t, b, keys, size)
	return keys
}

func put(t testing.TB, b *blob.Bucket, keys []string, size int) {
	t.Helper()
	ctx := context.Background()
	work := make(chan string)
	errs := make(chan error, len(keys))
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				body := content(k, size)
				sum := md5.Sum(body)
				if err := b.WriteAll(ctx, k, body, &blob.WriterOptions{ContentMD5: sum[:]}); err != nil {
					errs <- fmt.Errorf("write %s: %w", k, err)
				}
			}
		}()
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// object is what a test remembers of an object to tell it has not changed.
type object struct {
	Size    int64
	MD5     string
	ModTime string
}

// snapshot lists everything under prefix.
func snapshot(t testing.TB, b *blob.Bucket, prefix string) map[string]object {
	t.Helper()
	out := map[string]object{}
	// One page: fileblob can skip keys between pages.
	objs, _, err := b.ListPage(context.Background(), blob.FirstPageToken, 100_000, &blob.ListOptions{Prefix: prefix})
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	for _, o := range objs {
		if !o.IsDir {
			out[o.Key] = object{Size: o.Size, MD5: fmt.Sprintf("%x", o.MD5), ModTime: o.ModTime.String()}
		}
	}
	return out
}

// checkContents reads every key and compares it with content().
func checkContents(t testing.TB, b *blob.Bucket, keys []string, size int) {
	t.Helper()
	for _, k := range keys {
		got, err := b.ReadAll(context.Background(), k)
		if err != nil {
			t.Errorf("read %s: %v", k, err)
			continue
		}
		if !bytes.Equal(got, content(k, size)) {
			t.Errorf("%s: content changed", k)
		}
	}
}

// allStores are the stores every integration test runs on. Each is started
// inside its subtest, so that a component that is not built skips only its
// own subtests.
// perStore is n objects, or slow on the stores whose emulators list and
// delete one object at a time slowly (fake-gcs-server, Azurite: a 5,000-
// object deletion took them 2 and 13 minutes on the 2-core CI machine
// under load). A test that must cross a listing page (1,000 objects)
// keeps slow above that.
func perStore(scheme string, n, slow int) int {
	if scheme == "gs" || scheme == "azblob" {
		return min(n, slow)
	}
	return n
}

var allStores = []struct {
	name string
	open func(testing.TB) *testenv.BlobStore
}{
	{"s3", testenv.S3}, {"gs", testenv.GCS}, {"azblob", testenv.Azure}, {"file", testenv.File}, {"mem", testenv.Mem},
}

// minioDrive is the glob of the directory in which testenv's MinIO keeps
// bucket's objects under the path elem: in the folder testenv.DataDirEnv
// names (make test puts it on /dev/shm), or the system's temporary one.
func minioDrive(bucket string, elem ...string) string {
	parent := os.Getenv(testenv.DataDirEnv)
	if parent == "" {
		parent = os.TempDir()
	}
	return filepath.Join(append([]string{parent, "groundskeeper-minio-*", "data", bucket}, elem...)...)
}
