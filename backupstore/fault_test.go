package backupstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/proxytest"
	"github.com/groundskeeper-io/groundskeeper/internal/soak"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// viaProxy opens the S3 bucket s through p.
func viaProxy(t testing.TB, s *testenv.BlobStore, p *proxytest.Proxy) *blob.Bucket {
	t.Helper()
	return openURL(t, strings.Replace(s.URL, s.Endpoint, p.URL, 1), credsFor("s3"))
}

func isDeleteObjects(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Query().Has("delete")
}

// TestDeletePrefixOutageAndRerun: the store fails every DeleteObjects
// request after the first two (an outage part-way); the deletion reports
// exactly the keys it could not delete; a rerun once the store is back
// finishes the job; nothing outside the prefix is touched at any point.
func TestDeletePrefixOutageAndRerun(t *testing.T) {
	s := testenv.S3(t)
	p := proxytest.Start(t, s.Endpoint)
	direct := openStore(t, s)
	keys := fill(t, direct, "backups/a/", soak.Size(2500, 5000), 64)
	put(t, direct, siblingsOn("s3"), 64)
	outside := snapshot(t, direct, "")
	for _, k := range keys {
		delete(outside, k)
	}
	b := viaProxy(t, s, p)

	var deletes atomic.Int64
	p.SetFail(func(r *http.Request) bool {
		return isDeleteObjects(r) && deletes.Add(1) > 2
	})
	ctx := context.Background()
	res, err := backupstore.DeletePrefix(ctx, b, "backups/a/", &backupstore.DeleteOptions{
		Retry: backupstore.Retry{Attempts: 2, Initial: 10 * time.Millisecond},
	})
	var de *backupstore.DeleteError
	if !errors.Is(err, backupstore.ErrIncomplete) || !errors.As(err, &de) {
		t.Fatalf("DeletePrefix during an outage: %v (%+v, %d requests, %d failed); want a *DeleteError", err, res, p.Requests(), p.Failed())
	}
	left := snapshot(t, direct, "backups/a/")
	failed := de.Keys()
	slices.Sort(failed)
	var leftKeys []string
	for k := range left {
		leftKeys = append(leftKeys, k)
	}
	slices.Sort(leftKeys)
	if diff := cmp.Diff(leftKeys, failed); diff != "" {
		t.Errorf("failed keys are not exactly the keys left (-left +failed):\n%s", diff)
	}
	if res.Deleted != 2000 || int(res.Deleted)+len(failed) != len(keys) {
		t.Errorf("deleted %d, failed %d; want 2000 deleted (two batches) and the rest failed", res.Deleted, len(failed))
	}
	t.Logf("outage: %d deleted, %d failed, %d requests failed on purpose; %v", res.Deleted, len(failed), p.Failed(), err)
	if diff := cmp.Diff(outside, snapshot(t, direct, "")); !strings.Contains(diff, "backups/a/") && diff != "" {
		t.Errorf("objects outside the prefix changed:\n%s", diff)
	}

	// The store is back: a rerun finishes.
	p.SetFail(nil)
	res, err = backupstore.DeletePrefix(ctx, b, "backups/a/", nil)
	if err != nil || res.Deleted != int64(len(left)) {
		t.Fatalf("rerun: %+v, %v; want %d deleted", res.DeleteProgress, err, len(left))
	}
	if diff := cmp.Diff(outside, snapshot(t, direct, "")); diff != "" {
		t.Errorf("after the rerun the bucket is not exactly what was outside the prefix (-want +got):\n%s", diff)
	}
	checkContents(t, direct, siblingsOn("s3"), 64)
}

// A gs bucket opened with endpoint= reads through that endpoint: behind a
// proxy (on a host of its own) an object written is read back, its
// attributes and its content. fake-gcs-server answers path-style XML reads
// only to requests naming its own host, so a client reading by the XML
// API found the attributes (JSON API) and then no content: collect kept a
// backup whose marker it could not read, for ever.
func TestGCSEndpointReadsThroughAProxy(t *testing.T) {
	s := testenv.GCS(t)
	p := proxytest.Start(t, s.Endpoint)
	b := openURL(t, withParam(s.URL, "endpoint="+p.URL+"&anonymous=true"), nil)
	ctx := t.Context()
	const key = "proxied/.marker"
	if err := backupstore.WriteMarker(ctx, b, key, "uid-1", []byte("the marker")); err != nil {
		t.Fatal(err)
	}
	owner, found, err := backupstore.MarkerOwner(ctx, b, key)
	if err != nil || !found || owner != "uid-1" {
		t.Fatalf("MarkerOwner = %q, %v, %v; want uid-1", owner, found, err)
	}
	got, err := b.ReadAll(ctx, key)
	if err != nil || string(got) != "the marker" {
		t.Fatalf("ReadAll through the proxy = %q, %v; want the marker", got, err)
	}
	if p.Requests() == 0 {
		t.Fatal("no request went through the proxy")
	}
}

// TestDeletePrefixFlakyStore: one request in three fails with 503; retries
// with backoff get everything deleted.
func TestDeletePrefixFlakyStore(t *testing.T) {
	for _, st := range allStores[:3] {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			s := st.open(t)
			direct := openStore(t, s)
			fill(t, direct, "backups/f/", 600, 32)
			put(t, direct, siblingsOn(s.Scheme), 32)
			p := proxytest.Start(t, s.Endpoint)
			var n atomic.Int64
			p.SetFail(func(r *http.Request) bool { return n.Add(1)%3 == 0 })
			var b *blob.Bucket
			switch s.Scheme {
			case "s3":
				b = viaProxy(t, s, p)
			case "azblob":
				u := strings.Replace(s.URL, strings.TrimPrefix(strings.TrimSuffix(s.Endpoint, "/"+testenv.AzureAccount), "http://"), p.Host, 1)
				b = openURL(t, u, credsFor("azblob"))
			case "gs":
				// An explicit endpoint wins over STORAGE_EMULATOR_HOST.
				b = openURL(t, withParam(s.URL, "endpoint="+p.URL+"&anonymous=true"), nil)
			}
			res, err := backupstore.DeletePrefix(context.Background(), b, "backups/f/", &backupstore.DeleteOptions{
				Retry: backupstore.Retry{Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond, Attempts: 10},
			})
			if err != nil || res.Deleted != 600 {
				t.Fatalf("%+v, %v; want 600 deleted", res.DeleteProgress, err)
			}
			if p.Failed() == 0 {
				t.Fatal("no request failed: the proxy was not in the path")
			}
			t.Logf("%d requests, %d failed on purpose", p.Requests(), p.Failed())
			if left := snapshot(t, direct, "backups/f/"); len(left) != 0 {
				t.Errorf("%d left", len(left))
			}
			checkContents(t, direct, siblingsOn(s.Scheme), 32)
		})
	}
}

// TestDeletePrefixAzureBatch runs the Blob Batch path against Azurite
// (which DeletePrefix otherwise avoids there, for speed), with a key that
// is already gone.
func TestDeletePrefixAzureBatch(t *testing.T) {
	s := testenv.Azure(t)
	b := openStore(t, s)
	keys := fill(t, b, "backups/z/", 600, 16)
	put(t, b, siblings, 16)
	res, err := backupstore.DeletePrefix(context.Background(), b, "backups/z/", &backupstore.DeleteOptions{AzureBatch: backupstore.BatchAlways})
	if err != nil || res.Deleted != int64(len(keys)) || res.Method != "azure-batch" {
		t.Fatalf("%+v %s, %v; want %d deleted by azure-batch", res.DeleteProgress, res.Method, err, len(keys))
	}
	if left := snapshot(t, b, "backups/z/"); len(left) != 0 {
		t.Errorf("%d left", len(left))
	}
	checkContents(t, b, siblings, 16)
}

// TestDeletePrefixBoundsFailedKeys: when the store refuses every key, the
// deletion names the first MaxFailedKeys failures (lowered to 500 here) and
// only counts the others, so that its memory does not grow with the keys;
// it stops after the first pass, since a second could not tell the failed
// keys it forgot from new ones.
func TestDeletePrefixBoundsFailedKeys(t *testing.T) {
	defer backupstore.SetMaxFailedKeys(500)()
	s := testenv.S3(t)
	p := proxytest.Start(t, s.Endpoint)
	keys := fill(t, openStore(t, s), "backups/a/", 2500, 16)
	b := viaProxy(t, s, p)
	p.SetFail(isDeleteObjects)
	var lists atomic.Int64
	p.SetHandler(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && r.URL.Query().Has("list-type") {
			lists.Add(1)
		}
		return false
	})
	res, err := backupstore.DeletePrefix(context.Background(), b, "backups/a/", &backupstore.DeleteOptions{
		Retry: backupstore.Retry{Attempts: 1},
	})
	var de *backupstore.DeleteError
	if !errors.As(err, &de) {
		t.Fatalf("DeletePrefix on a store that refuses every key: %v, want a *DeleteError", err)
	}
	if len(de.Failed) != 500 || de.Unnamed != int64(len(keys)-500) || res.Failed != int64(len(keys)) || len(res.FailedKeys) != 500 {
		t.Errorf("named %d (result %d), unnamed %d, counted %d; want 500 named, %d unnamed, %d counted",
			len(de.Failed), len(res.FailedKeys), de.Unnamed, res.Failed, len(keys)-500, len(keys))
	}
	if !strings.Contains(err.Error(), "2500 keys failed") {
		t.Errorf("error %q does not count every failed key", err)
	}
	// One pass: three pages of 1,000 keys (the last one short), no second
	// listing.
	if n := lists.Load(); n != 3 {
		t.Errorf("%d listing requests, want 3 (one pass)", n)
	}
}

// TestDeletePrefixLastKeyOutlivesAnOutage: a deletion with
// DeleteOptions.Last that an outage cuts short leaves the last key (an
// owner marker) in place with the rest of what it could not delete, so a
// retry can still prove whose they are; the retry deletes everything, the
// last key too. On a versioned bucket the last key keeps its version until
// the end.
func TestDeletePrefixLastKeyOutlivesAnOutage(t *testing.T) {
	for _, versioned := range []bool{false, true} {
		t.Run(fmt.Sprintf("versioned=%v", versioned), func(t *testing.T) {
			s := testenv.S3With(t, testenv.BucketOptions{Versioning: versioned})
			p := proxytest.Start(t, s.Endpoint)
			direct := openStore(t, s)
			ctx := context.Background()
			const marker = "backups/a/.owner"
			// Keys on both sides of the marker in listing order.
			keys := append(fill(t, direct, "backups/a/", soak.Size(1500, 2500), 16), "backups/a/-first", "backups/a/~last")
			for _, k := range append(keys[len(keys)-2:], marker) {
				if err := direct.WriteAll(ctx, k, []byte("m"), nil); err != nil {
					t.Fatal(err)
				}
			}
			put(t, direct, siblingsOn("s3"), 16)
			b := viaProxy(t, s, p)

			var deletes atomic.Int64
			p.SetFail(func(r *http.Request) bool {
				return isDeleteObjects(r) && deletes.Add(1) > 1
			})
			opts := &backupstore.DeleteOptions{Last: marker, Retry: backupstore.Retry{Attempts: 2, Initial: time.Millisecond}}
			res, err := backupstore.DeletePrefix(ctx, b, "backups/a/", opts)
			if !errors.Is(err, backupstore.ErrIncomplete) {
				t.Fatalf("DeletePrefix during an outage: %+v, %v; want ErrIncomplete", res.DeleteProgress, err)
			}
			if res.Deleted == 0 {
				t.Fatal("the outage let nothing be deleted: the test proves nothing")
			}
			if ok, err := direct.Exists(ctx, marker); err != nil || !ok {
				t.Fatalf("after %d of %d objects were deleted, the last key %s: exists=%v, %v; want it kept while anything else is left", res.Deleted, len(keys)+1, marker, ok, err)
			}

			p.SetFail(nil)
			if res, err := backupstore.DeletePrefix(ctx, b, "backups/a/", opts); err != nil {
				t.Fatalf("rerun: %+v, %v", res.DeleteProgress, err)
			}
			if left := snapshot(t, direct, "backups/a/"); len(left) != 0 {
				_, has := left[marker]
				t.Errorf("%d objects left after the rerun, among them the last key: %v", len(left), has)
			}
			checkContents(t, direct, siblingsOn("s3"), 16)
		})
	}
}

// TestDeletePrefixRefusesALastKeyOutsideThePrefix: Last names a key of
// the prefix or nothing is done.
func TestDeletePrefixRefusesALastKeyOutsideThePrefix(t *testing.T) {
	b := memblob.OpenBucket(nil)
	defer b.Close()
	ctx := context.Background()
	for _, k := range []string{"backups/a/1", "backups/ab/.owner"} {
		if err := b.WriteAll(ctx, k, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	empty := ""
	_, err := backupstore.DeletePrefix(ctx, b, "backups/a/", &backupstore.DeleteOptions{Last: "backups/ab/.owner", BucketPrefix: &empty})
	if !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), `Last = "backups/ab/.owner"`) {
		t.Fatalf("DeletePrefix with a Last key outside the prefix: %v; want ErrInvalidConfig naming it", err)
	}
	if ok, _ := b.Exists(ctx, "backups/a/1"); !ok {
		t.Error("refused, yet it deleted backups/a/1")
	}
}
