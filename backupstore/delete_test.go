package backupstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// siblings are the keys next to "backups/a/" that share its leading
// characters, and that no deletion of "backups/a/" may touch.
var siblings = []string{
	"backups/a",           // the prefix without its separator, as an object
	"backups/a.tar",       // same leading characters
	"backups/ab/00001",    // the sibling prefix of the issue
	"backups/ab/00002",    //
	"backups/ab/a/00001",  // nested under the sibling
	"backups/a-old/00001", // "-" sorts before "/"
	"backups/a0/00001",    // "0" sorts after "/"
	"backups/b/a/00001",   // the same name deeper down
	"other/backups/a/0",   // the same name under another root
}

// siblingsOn leaves out "backups/a" on file:// and on MinIO, which keep
// objects as files: a file cannot have the name of the directory
// "backups/a/" (MinIO silently drops the objects under "backups/a/" when
// "backups/a" is written).
func siblingsOn(scheme string) []string {
	if scheme == "file" || scheme == "s3" {
		return siblings[1:]
	}
	return siblings
}

func TestDeletePrefixLeavesSiblings(t *testing.T) {
	for _, st := range allStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			s := st.open(t)
			b := openStore(t, s)
			// Past a listing page (1,000) everywhere.
			n, size := int64(perStore(s.Scheme, 5000, 1200)), int64(128)
			fill(t, b, "backups/a/", int(n), int(size))
			put(t, b, siblingsOn(s.Scheme), 64)
			before := snapshot(t, b, "")
			ctx := context.Background()

			// A dry run names exactly the objects under the prefix.
			dry, err := backupstore.DeletePrefix(ctx, b, "backups/a/", &backupstore.DeleteOptions{DryRun: true})
			if err != nil {
				t.Fatalf("dry run: %v", err)
			}
			if int64(len(dry.Keys)) != n || dry.Bytes != n*size {
				t.Fatalf("dry run: %d keys, %d bytes; want %d, %d", len(dry.Keys), dry.Bytes, n, n*size)
			}
			for _, k := range dry.Keys {
				if _, ok := before[k]; !ok || k[:10] != "backups/a/" {
					t.Fatalf("dry run names %q", k)
				}
			}
			if got := snapshot(t, b, ""); len(got) != len(before) {
				t.Fatalf("dry run deleted objects: %d left of %d", len(got), len(before))
			}

			var mu sync.Mutex
			var last backupstore.DeleteProgress
			calls := 0
			start := time.Now()
			res, err := backupstore.DeletePrefix(ctx, b, "backups/a/", &backupstore.DeleteOptions{
				Progress: func(p backupstore.DeleteProgress) {
					mu.Lock()
					defer mu.Unlock()
					if p.Deleted < last.Deleted || p.Listed < last.Listed {
						t.Errorf("progress went back: %+v after %+v", p, last)
					}
					last = p
					calls++
				},
			})
			if err != nil {
				t.Fatalf("DeletePrefix: %v", err)
			}
			t.Logf("%s: deleted %d objects in %v (%s, %d progress calls)", s.Scheme, res.Deleted, time.Since(start), res.Method, calls)
			if res.Deleted != n || res.DeletedBytes != n*size || res.Failed != 0 || len(res.FailedKeys) != 0 {
				t.Errorf("result %+v; want %d deleted, %d bytes", res.DeleteProgress, n, n*size)
			}
			if !last.Done || last.Deleted != n || last.Listed != n {
				t.Errorf("last progress %+v; want Done with %d listed and deleted", last, n)
			}
			if left := snapshot(t, b, "backups/a/"); len(left) != 0 {
				t.Errorf("%d objects left under the prefix", len(left))
			}
			after := snapshot(t, b, "")
			want := maps.Clone(before)
			maps.DeleteFunc(want, func(k string, _ object) bool { return len(k) > 10 && k[:10] == "backups/a/" })
			if diff := cmp.Diff(want, after); diff != "" {
				t.Errorf("objects outside the prefix changed (-before +after):\n%s", diff)
			}
			checkContents(t, b, siblingsOn(s.Scheme), 64)
			wantMethod := map[string][]string{"s3": {"s3-batch"}, "azblob": {"azure-batch", "per-object"}}[s.Scheme]
			if wantMethod == nil {
				wantMethod = []string{"per-object"}
			}
			if !slices.Contains(wantMethod, res.Method) {
				t.Errorf("method %q; want one of %v", res.Method, wantMethod)
			}

			// Running it again finds nothing and succeeds.
			res, err = backupstore.DeletePrefix(ctx, b, "backups/a/", nil)
			if err != nil || res.Deleted != 0 {
				t.Errorf("second run: %+v, %v", res.DeleteProgress, err)
			}
		})
	}
}

func TestDeletePrefixRefusesUnsafePrefixes(t *testing.T) {
	b := openURL(t, "mem://", nil)
	put(t, b, append([]string{"backups/a/1", "x"}, siblings...), 8)
	before := snapshot(t, b, "")
	for _, p := range []string{"", "/", "//", "backups/a", "backups/../", "backups/./a/", "../backups/", "backups//", "/backups/a/", "backups/a\x00/"} {
		res, err := backupstore.DeletePrefix(context.Background(), b, p, nil)
		if !errors.Is(err, backupstore.ErrUnsafePrefix) {
			t.Errorf("DeletePrefix(%q) = %v; want ErrUnsafePrefix", p, err)
		}
		var pe *backupstore.PrefixError
		if !errors.As(err, &pe) || pe.Prefix != p {
			t.Errorf("DeletePrefix(%q): error %v does not name the prefix", p, err)
		}
		if res == nil || res.Deleted != 0 || res.Listed != 0 {
			t.Errorf("DeletePrefix(%q) touched the store: %+v", p, res)
		}
	}
	if diff := cmp.Diff(before, snapshot(t, b, "")); diff != "" {
		t.Errorf("refused deletions changed the bucket:\n%s", diff)
	}

	// With the opt-in, a partial prefix deletes its siblings too, as documented.
	res, err := backupstore.DeletePrefix(context.Background(), b, "backups/a", &backupstore.DeleteOptions{
		PrefixRules: backupstore.PrefixRules{AllowPartial: true}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"backups/a", "backups/a-old/00001", "backups/a.tar", "backups/a/1", "backups/a0/00001", "backups/ab/00001", "backups/ab/00002", "backups/ab/a/00001"}
	if diff := cmp.Diff(want, res.Keys); diff != "" {
		t.Errorf("partial prefix dry run (-want +got):\n%s", diff)
	}
	// The whole bucket only with AllowEmpty.
	res, err = backupstore.DeletePrefix(context.Background(), b, "", &backupstore.DeleteOptions{PrefixRules: backupstore.PrefixRules{AllowEmpty: true}})
	if err != nil || res.Deleted != int64(len(before)) {
		t.Errorf("AllowEmpty: %+v, %v; want %d deleted", res.DeleteProgress, err, len(before))
	}
}

func TestDeletePrefixCancel(t *testing.T) {
	for _, st := range allStores[:4] {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			s := st.open(t)
			b := openStore(t, s)
			keys := fill(t, b, "backups/c/", perStore(s.Scheme, 3000, 1200), 16)
			put(t, b, siblingsOn(s.Scheme), 16)
			ctx, cancel := context.WithCancel(context.Background())
			var canceledAt time.Time
			var once sync.Once
			res, err := backupstore.DeletePrefix(ctx, b, "backups/c/", &backupstore.DeleteOptions{
				Concurrency: 1,
				Progress: func(p backupstore.DeleteProgress) {
					if p.Deleted > 0 {
						once.Do(func() { canceledAt = time.Now(); cancel() })
					}
				},
			})
			returned := time.Since(canceledAt)
			if !errors.Is(err, context.Canceled) || !errors.Is(err, backupstore.ErrIncomplete) {
				t.Fatalf("err = %v; want context.Canceled and ErrIncomplete", err)
			}
			if returned > 2*time.Second {
				t.Errorf("returned %v after cancel; want promptly", returned)
			}
			if res.Deleted == 0 || res.Deleted >= int64(len(keys)) {
				t.Errorf("deleted %d of %d before the cancel took effect", res.Deleted, len(keys))
			}
			// Every key that failed is still there, except those of a
			// request in flight when the context ended (Progress runs
			// asynchronously, so the worker may have sent the next
			// request): the store may have carried that out.
			left := snapshot(t, b, "backups/c/")
			var de *backupstore.DeleteError
			if errors.As(err, &de) {
				for _, f := range de.Failed {
					if _, ok := left[f.Key]; !ok && !errors.Is(f.Err, context.Canceled) {
						t.Errorf("%s reported failed (%v) but is gone", f.Key, f.Err)
					}
				}
			}
			t.Logf("canceled after %d deleted, %d failed, %d left, returned %v after cancel", res.Deleted, len(res.FailedKeys), len(left), returned)
			// A rerun finishes the job.
			res, err = backupstore.DeletePrefix(context.Background(), b, "backups/c/", nil)
			if err != nil || res.Deleted > int64(len(left)) {
				t.Errorf("rerun: %+v, %v; want at most %d deleted", res.DeleteProgress, err, len(left))
			}
			if got := snapshot(t, b, "backups/c/"); len(got) != 0 {
				t.Errorf("after rerun %d objects under the prefix", len(got))
			}
			if got := snapshot(t, b, "backups/"); len(got) != len(snapshot(t, b, ""))-1 || len(got) == 0 {
				t.Errorf("after rerun %d objects under backups/; want the siblings", len(got))
			}
		})
	}
}

var _ = fmt.Sprint
var _ = blob.FirstPageToken

// TestDeletePrefixOnPrefixedBucket deletes through gocloud's
// blob.PrefixedBucket (what a bucket URL with prefix= opens): only the
// objects under the bucket's prefix plus the deleted prefix go, on every
// store, including those deleted through their native batch API. (Not mem:
// every mem:// bucket opened is a new, empty one.)
func TestDeletePrefixOnPrefixedBucket(t *testing.T) {
	for _, st := range allStores[:4] {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			s := st.open(t)
			b := openStore(t, s)
			fill(t, b, "tenant/backups/a/", 30, 16)
			outside := []string{"backups/a/00001", "tenant/backups/ab/00001", "other/tenant/backups/a/00001", "tenant-2/backups/a/00001"}
			put(t, b, outside, 16)
			pb := blob.PrefixedBucket(openStore(t, s), "tenant/") // closes the bucket it is given

			res, err := backupstore.DeletePrefix(context.Background(), pb, "backups/a/", nil)
			if err != nil {
				t.Fatalf("DeletePrefix: %v", err)
			}
			if res.Deleted != 30 {
				t.Errorf("deleted %d objects, want 30", res.Deleted)
			}
			left := slices.Sorted(maps.Keys(snapshot(t, b, "")))
			if diff := cmp.Diff(slices.Sorted(slices.Values(outside)), left); diff != "" {
				t.Errorf("objects left (-want +got):\n%s", diff)
			}
		})
	}
}

// withParam adds a query parameter to a bucket URL.
func withParam(rawURL, kv string) string {
	if strings.Contains(rawURL, "?") {
		return rawURL + "&" + kv
	}
	return rawURL + "?" + kv
}

// TestDeletePrefixOnPrefixedBucketLeavesSiblingTenant: a shared bucket
// opened with prefix=tenant-a (no trailing "/") holds "tenant-ab/secret" as
// key "b/secret". DeletePrefix through it is refused before anything is
// deleted, whatever prefix the caller gives; with prefix=tenant-a/ it deletes
// exactly tenant-a's keys.
func TestDeletePrefixOnPrefixedBucketLeavesSiblingTenant(t *testing.T) {
	for _, st := range allStores[:4] {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			s := st.open(t)
			direct := openStore(t, s)
			own := []string{"tenant-a/00001", "tenant-a/00002"}
			others := []string{"tenant-ab/secret", "tenant-ab/b/00001", "tenant-b/00001"}
			put(t, direct, append(slices.Clone(own), others...), 16)
			before := snapshot(t, direct, "")
			ctx := context.Background()

			partial := map[string]*blob.Bucket{
				"URL prefix=tenant-a": openURL(t, withParam(s.URL, "prefix=tenant-a"), credsFor(s.Scheme)),
			}
			if s.Scheme != "file" {
				// The store's listing request shows the effective prefix
				// even of a bucket OpenBucket did not open (fileblob's
				// does not: see the package doc).
				partial["blob.PrefixedBucket tenant-a"] = blob.PrefixedBucket(openStore(t, s), "tenant-a")
			}
			for name, b := range partial {
				for _, tc := range []struct {
					prefix string
					rules  backupstore.PrefixRules
				}{{"", backupstore.PrefixRules{AllowEmpty: true}}, {"b/", backupstore.PrefixRules{}}} {
					for _, dry := range []bool{true, false} {
						res, err := backupstore.DeletePrefix(ctx, b, tc.prefix, &backupstore.DeleteOptions{PrefixRules: tc.rules, DryRun: dry})
						var pe *backupstore.PrefixError
						if !errors.Is(err, backupstore.ErrUnsafePrefix) || !errors.As(err, &pe) || !strings.HasPrefix(pe.Prefix, "tenant-a") {
							t.Errorf("%s: DeletePrefix(%q, dry run %v) = %+v, %v; want a *PrefixError naming the effective prefix", name, tc.prefix, dry, res.DeleteProgress, err)
						}
						if res.Deleted != 0 || len(res.Keys) != 0 {
							t.Errorf("%s: DeletePrefix(%q, dry run %v): %d deleted, keys %v; want none", name, tc.prefix, dry, res.Deleted, res.Keys)
						}
					}
				}
			}
			if diff := cmp.Diff(before, snapshot(t, direct, "")); diff != "" {
				t.Fatalf("a refused deletion changed the bucket (-before +after):\n%s", diff)
			}

			// With the separator, the bucket is tenant-a's alone.
			b := openURL(t, withParam(s.URL, "prefix=tenant-a/"), credsFor(s.Scheme))
			res, err := backupstore.DeletePrefix(ctx, b, "", &backupstore.DeleteOptions{PrefixRules: backupstore.PrefixRules{AllowEmpty: true}})
			if err != nil || res.Deleted != int64(len(own)) {
				t.Fatalf("DeletePrefix on prefix=tenant-a/: %+v, %v; want %d deleted", res.DeleteProgress, err, len(own))
			}
			want := maps.Clone(before)
			for _, k := range own {
				delete(want, k)
			}
			if diff := cmp.Diff(want, snapshot(t, direct, "")); diff != "" {
				t.Errorf("objects left (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeletePrefixEmptyOnUnseenBucketPrefixLeavesSiblingTenant: a
// blob.PrefixedBucket made by the caller over fileblob or memblob does not
// show its prefix to DeletePrefix. Deleting its "" with AllowEmpty would
// delete everything under "tenant-a", "tenant-ab/secret" included: it is
// refused, unless the caller states the bucket's prefix (then checked as
// any other) or opts out.
func TestDeletePrefixEmptyOnUnseenBucketPrefixLeavesSiblingTenant(t *testing.T) {
	for _, st := range []struct {
		name string
		open func(testing.TB) *blob.Bucket
	}{
		{"mem", func(testing.TB) *blob.Bucket { return memblob.OpenBucket(nil) }},
		{"file", func(t testing.TB) *blob.Bucket { return openStore(t, testenv.File(t)) }},
	} {
		t.Run(st.name, func(t *testing.T) {
			ctx := context.Background()
			emptyOK := backupstore.PrefixRules{AllowEmpty: true}
			// view fills a new store and returns its blob.PrefixedBucket
			// under prefix (which closes the bucket it is given).
			view := func(prefix string) *blob.Bucket {
				b := st.open(t)
				put(t, b, []string{"tenant-a/00001", "tenant-a/00002", "tenant-ab/secret", "tenant-b/00001"}, 16)
				v := blob.PrefixedBucket(b, prefix)
				t.Cleanup(func() { v.Close() })
				return v
			}
			for _, dry := range []bool{true, false} {
				v := view("tenant-a")
				res, err := backupstore.DeletePrefix(ctx, v, "", &backupstore.DeleteOptions{PrefixRules: emptyOK, DryRun: dry})
				if !errors.Is(err, backupstore.ErrUnsafePrefix) || !strings.Contains(err.Error(), "BucketPrefix") {
					t.Errorf("DeletePrefix(PrefixedBucket(tenant-a), \"\", dry run %v) = %+v, %v; want ErrUnsafePrefix naming BucketPrefix", dry, res.DeleteProgress, err)
				}
				// The view lists tenant-ab/secret as "b/secret".
				if got := slices.Sorted(maps.Keys(snapshot(t, v, ""))); !slices.Equal(got, []string{"/00001", "/00002", "b/secret"}) {
					t.Errorf("after the refused deletion (dry run %v) the view holds %q", dry, got)
				}
			}
			stated := "tenant-a"
			v := view("tenant-a")
			if _, err := backupstore.DeletePrefix(ctx, v, "", &backupstore.DeleteOptions{PrefixRules: emptyOK, BucketPrefix: &stated}); !errors.Is(err, backupstore.ErrUnsafePrefix) {
				t.Errorf("with BucketPrefix %q stated: %v; want ErrUnsafePrefix", stated, err)
			}
			if n := len(snapshot(t, v, "")); n != 3 {
				t.Errorf("after the refused deletion the view holds %d objects; want 3", n)
			}

			stated = "tenant-a/"
			res, err := backupstore.DeletePrefix(ctx, view("tenant-a/"), "", &backupstore.DeleteOptions{PrefixRules: emptyOK, BucketPrefix: &stated})
			if err != nil || res.Deleted != 2 {
				t.Errorf("with BucketPrefix %q stated: %+v, %v; want 2 deleted", stated, res.DeleteProgress, err)
			}
			res, err = backupstore.DeletePrefix(ctx, view("tenant-a/"), "", &backupstore.DeleteOptions{PrefixRules: emptyOK, AllowUnknownBucketPrefix: true})
			if err != nil || res.Deleted != 2 {
				t.Errorf("with AllowUnknownBucketPrefix: %+v, %v; want 2 deleted", res.DeleteProgress, err)
			}
		})
	}
}

// TestDeletePrefixRefusesAStatedBucketPrefixThatDiffers: a BucketPrefix
// that differs from what OpenBucket knows is refused.
func TestDeletePrefixRefusesAStatedBucketPrefixThatDiffers(t *testing.T) {
	b := openURL(t, "mem://?prefix=tenant-a/", nil)
	put(t, b, []string{"x/1"}, 4)
	stated := "tenant-b/"
	_, err := backupstore.DeletePrefix(context.Background(), b, "x/", &backupstore.DeleteOptions{BucketPrefix: &stated})
	if !errors.Is(err, backupstore.ErrUnsafePrefix) || !strings.Contains(err.Error(), `"tenant-b/"`) {
		t.Errorf("DeletePrefix = %v; want ErrUnsafePrefix naming the stated prefix", err)
	}
	if len(snapshot(t, b, "")) != 1 {
		t.Error("a refused deletion deleted")
	}
}
