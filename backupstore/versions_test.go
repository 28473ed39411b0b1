package backupstore_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	gocmp "github.com/google/go-cmp/cmp"
	"gocloud.dev/blob"
	"google.golang.org/api/iterator"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/proxytest"
	"github.com/groundskeeper-io/groundskeeper/internal/soak"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// s3Client is the aws-sdk-go-v2 client under b.
func s3Client(t testing.TB, b *blob.Bucket) *s3.Client {
	t.Helper()
	var c *s3.Client
	if !b.As(&c) {
		t.Fatal("bucket is not an s3blob bucket")
	}
	return c
}

// version is what a test remembers of one version or delete marker.
type version struct {
	Key, VersionID string
	Marker, Latest bool
	Size           int64
}

// versions lists every version and delete marker under prefix.
func versions(t testing.TB, c *s3.Client, bucket, prefix string) []version {
	t.Helper()
	var out []version
	p := s3.NewListObjectVersionsPaginator(c, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list versions under %q: %v", prefix, err)
		}
		for _, v := range page.Versions {
			out = append(out, version{Key: *v.Key, VersionID: *v.VersionId, Latest: *v.IsLatest, Size: *v.Size})
		}
		for _, m := range page.DeleteMarkers {
			out = append(out, version{Key: *m.Key, VersionID: *m.VersionId, Marker: true, Latest: *m.IsLatest})
		}
	}
	slices.SortFunc(out, func(a, b version) int {
		return strings.Compare(a.Key+"\x00"+a.VersionID, b.Key+"\x00"+b.VersionID)
	})
	return out
}

// writeMarkers deletes keys without a version: on a versioned bucket, each
// gets a delete marker on top of its versions.
func writeMarkers(t testing.TB, c *s3.Client, bucket string, keys []string) {
	t.Helper()
	for chunk := range slices.Chunk(keys, 1000) {
		ids := make([]s3types.ObjectIdentifier, len(chunk))
		for i, k := range chunk {
			ids[i] = s3types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := c.DeleteObjects(context.Background(), &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &s3types.Delete{Objects: ids}})
		if err != nil || len(out.Errors) > 0 {
			t.Fatalf("write delete markers: %v %v", err, out)
		}
	}
}

// versionedFixture writes n keys under prefix, three versions each (of
// size, size+1, size+2 bytes), and a delete marker on every third key,
// and returns the versions and markers written.
func versionedFixture(t testing.TB, b *blob.Bucket, c *s3.Client, bucket, prefix string, n, size int) (vs, markers int64, bytes int64) {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	for v := range 3 {
		put(t, b, keys, size+v)
		bytes += int64(n * (size + v))
	}
	var marked []string
	for i := 0; i < n; i += 3 {
		marked = append(marked, keys[i])
	}
	writeMarkers(t, c, bucket, marked)
	return int64(3 * n), int64(len(marked)), bytes
}

// TestDeletePrefixVersioned: on a versioned MinIO bucket, DeletePrefix
// deletes every version and every delete marker under the prefix, with
// DeleteObjects naming each version (1,000 a request), and leaves a
// look-alike sibling prefix's versions and markers as they were. The dry
// run lists each version and marker with its bytes.
func TestDeletePrefixVersioned(t *testing.T) {
	s := testenv.S3With(t, testenv.BucketOptions{Versioning: true})
	p := proxytest.Start(t, s.Endpoint)
	direct := openStore(t, s)
	c := s3Client(t, direct)
	n := soak.Size(1500, 5000)
	if testing.Short() {
		n = 500
	}
	const size = 64
	start := time.Now()
	nv, nm, bytes := versionedFixture(t, direct, c, s.Bucket, "backups/a/", n, size)
	versionedFixture(t, direct, c, s.Bucket, "backups/ab/", 50, size)
	put(t, direct, siblingsOn("s3"), 16)
	writeMarkers(t, c, s.Bucket, []string{"backups/a-old/00001"})
	t.Logf("fixture: %d versions and %d delete markers under the prefix, written in %v", nv, nm, time.Since(start))
	siblingsBefore := slices.DeleteFunc(versions(t, c, s.Bucket, ""), func(v version) bool { return strings.HasPrefix(v.Key, "backups/a/") })
	if len(siblingsBefore) < 150 {
		t.Fatalf("fixture has %d sibling versions", len(siblingsBefore))
	}
	b := viaProxy(t, s, p)
	ctx := context.Background()

	dry, err := backupstore.DeletePrefix(ctx, b, "backups/a/", &backupstore.DeleteOptions{DryRun: true})
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if !dry.Versioned || int64(len(dry.Versions)) != nv+nm || dry.Bytes != bytes || len(dry.Keys) != n {
		t.Fatalf("dry run: versioned %v, %d versions, %d bytes, %d keys; want %d versions and markers, %d bytes, %d keys",
			dry.Versioned, len(dry.Versions), dry.Bytes, len(dry.Keys), nv+nm, bytes, n)
	}
	var markers int64
	for _, v := range dry.Versions {
		if !strings.HasPrefix(v.Key, "backups/a/") || v.VersionID == "" {
			t.Fatalf("dry run names %+v", v)
		}
		if v.DeleteMarker {
			markers++
			if v.Size != 0 || !v.Latest {
				t.Errorf("dry run: marker %+v; want latest, 0 bytes", v)
			}
		}
	}
	if markers != nm {
		t.Errorf("dry run lists %d delete markers; want %d", markers, nm)
	}
	if got := versions(t, c, s.Bucket, "backups/a/"); int64(len(got)) != nv+nm {
		t.Fatalf("dry run deleted versions: %d left of %d", len(got), nv+nm)
	}

	p.ResetCounts()
	start = time.Now()
	res, err := backupstore.DeletePrefix(ctx, b, "backups/a/", nil)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("DeletePrefix: %v", err)
	}
	reqs := p.Requests()
	t.Logf("deleted %d versions and markers in %v with %d requests (%.4f a version; %s)", res.Deleted, elapsed, reqs, float64(reqs)/float64(res.Deleted), res.Method)
	if res.Method != "s3-versions" || !res.Versioned || res.Deleted != nv+nm || res.DeletedBytes != bytes || res.Failed != 0 {
		t.Errorf("result %+v, method %q; want %d deleted, %d bytes, s3-versions", res.DeleteProgress, res.Method, nv+nm, bytes)
	}
	if left := versions(t, c, s.Bucket, "backups/a/"); len(left) != 0 {
		t.Errorf("%d versions or markers left under the prefix, first %+v", len(left), left[0])
	}
	if diff := gocmp.Diff(siblingsBefore, versions(t, c, s.Bucket, "")); diff != "" {
		t.Errorf("versions outside the prefix changed (-before +after):\n%s", diff)
	}
	checkContents(t, direct, slices.DeleteFunc(siblingsOn("s3"), func(k string) bool { return k == "backups/a-old/00001" }), 16)
	// Lists of 1,000 versions and DeleteObjects of 1,000: about two
	// requests per 1,000 versions, one GetBucketVersioning and the listing
	// of the second pass.
	if limit := (nv+nm)/1000*2 + 6; reqs > limit {
		t.Errorf("%d requests; want at most %d", reqs, limit)
	}

	// A rerun finds nothing.
	res, err = backupstore.DeletePrefix(ctx, b, "backups/a/", nil)
	if err != nil || res.Deleted != 0 {
		t.Errorf("rerun: %+v, %v", res.DeleteProgress, err)
	}
}

// TestDeletePrefixKeepNoncurrentVersions: with KeepNoncurrentVersions,
// DeletePrefix deletes only the current versions (the store writes delete
// markers) and keeps every older one, as a plain delete does.
func TestDeletePrefixKeepNoncurrentVersions(t *testing.T) {
	s := testenv.S3With(t, testenv.BucketOptions{Versioning: true})
	b := openStore(t, s)
	c := s3Client(t, b)
	nv, nm, _ := versionedFixture(t, b, c, s.Bucket, "backups/k/", 30, 8)
	res, err := backupstore.DeletePrefix(context.Background(), b, "backups/k/", &backupstore.DeleteOptions{KeepNoncurrentVersions: true})
	if err != nil {
		t.Fatal(err)
	}
	// 20 of the 30 keys had no marker yet: each gets one.
	if res.Versioned || res.Method != "s3-batch" || res.Deleted != 20 {
		t.Errorf("%+v, method %q, versioned %v; want 20 current objects deleted by key", res.DeleteProgress, res.Method, res.Versioned)
	}
	left := versions(t, c, s.Bucket, "backups/k/")
	var kept, markers int64
	for _, v := range left {
		if v.Marker {
			markers++
		} else {
			kept++
		}
	}
	if kept != nv || markers != nm+20 {
		t.Errorf("%d versions and %d markers left; want %d and %d", kept, markers, nv, nm+20)
	}
	if got := snapshot(t, b, "backups/k/"); len(got) != 0 {
		t.Errorf("%d current objects left", len(got))
	}
}

// TestDeletePrefixUnversionedAsksOnce: on a bucket without versioning,
// DeletePrefix asks once whether it is versioned, then deletes as before
// (no version listing, DeleteObjects by key).
func TestDeletePrefixUnversionedAsksOnce(t *testing.T) {
	s := testenv.S3(t)
	p := proxytest.Start(t, s.Endpoint)
	fill(t, openStore(t, s), "backups/u/", 2500, 8)
	var mu sync.Mutex
	kinds := map[string]int{}
	p.SetHandler(func(w http.ResponseWriter, r *http.Request) bool {
		q := r.URL.Query()
		kind := r.Method
		for _, k := range []string{"versioning", "versions", "delete", "list-type", "object-lock"} {
			if q.Has(k) {
				kind += " " + k
			}
		}
		mu.Lock()
		kinds[kind]++
		mu.Unlock()
		return false
	})
	res, err := backupstore.DeletePrefix(context.Background(), viaProxy(t, s, p), "backups/u/", nil)
	if err != nil || res.Deleted != 2500 || res.Versioned || res.Method != "s3-batch" {
		t.Fatalf("%+v, %v, method %q, versioned %v", res.DeleteProgress, err, res.Method, res.Versioned)
	}
	want := map[string]int{"GET versioning": 1, "GET list-type": 4, "POST delete": 3}
	if diff := gocmp.Diff(want, kinds); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// lockFixture writes key under Object Lock and returns its version.
func lockKey(t testing.TB, b *blob.Bucket, c *s3.Client, bucket, key string, mode s3types.ObjectLockRetentionMode, until time.Time, hold bool) string {
	t.Helper()
	put(t, b, []string{key}, 32)
	ctx := context.Background()
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	if mode != "" {
		if _, err := c.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{
			Bucket: aws.String(bucket), Key: aws.String(key), VersionId: head.VersionId,
			Retention: &s3types.ObjectLockRetention{Mode: mode, RetainUntilDate: aws.Time(until)},
		}); err != nil {
			t.Fatalf("retention on %s: %v", key, err)
		}
	}
	if hold {
		setHold(t, c, bucket, key, *head.VersionId, s3types.ObjectLockLegalHoldStatusOn)
	}
	return *head.VersionId
}

func setHold(t testing.TB, c *s3.Client, bucket, key, versionID string, status s3types.ObjectLockLegalHoldStatus) {
	t.Helper()
	if _, err := c.PutObjectLegalHold(context.Background(), &s3.PutObjectLegalHoldInput{
		Bucket: aws.String(bucket), Key: aws.String(key), VersionId: aws.String(versionID),
		LegalHold: &s3types.ObjectLockLegalHold{Status: status},
	}); err != nil {
		t.Fatalf("legal hold %s on %s: %v", status, key, err)
	}
}

// TestDeletePrefixObjectLock: on a MinIO bucket with Object Lock, versions
// under governance retention, compliance retention and a legal hold are
// never deleted; everything else under the prefix is; the error is
// ErrRetained and names each locked key with its retain-until or legal
// hold, and the earliest retain-until as the time to come back. After the
// hold is lifted and the retention periods pass, a rerun finishes.
func TestDeletePrefixObjectLock(t *testing.T) {
	s := testenv.S3With(t, testenv.BucketOptions{ObjectLock: true})
	b := openStore(t, s)
	c := s3Client(t, b)
	ctx := context.Background()
	free := fill(t, b, "backups/l/free/", 40, 16)
	put(t, b, free, 17) // a second version of each
	now := time.Now().UTC().Truncate(time.Second)
	// Windows long enough for the dry runs and the first deletion under
	// -race on a loaded machine: the lock must still hold through them.
	govUntil, compUntil := now.Add(15*time.Second), now.Add(17*time.Second)
	gov := lockKey(t, b, c, s.Bucket, "backups/l/gov", s3types.ObjectLockRetentionModeGovernance, govUntil, false)
	comp := lockKey(t, b, c, s.Bucket, "backups/l/comp", s3types.ObjectLockRetentionModeCompliance, compUntil, false)
	hold := lockKey(t, b, c, s.Bucket, "backups/l/hold", "", time.Time{}, true)
	// A locked version under a delete marker: the marker goes, the
	// version stays.
	writeMarkers(t, c, s.Bucket, []string{"backups/l/gov"})
	sibling := lockKey(t, b, c, s.Bucket, "backups/l-other/x", "", time.Time{}, false)

	// The dry run says which versions the lock keeps, and deletes nothing;
	// with the governance bypass, the governance version is not kept.
	for _, bypass := range []bool{false, true} {
		dry, err := backupstore.DeletePrefix(ctx, b, "backups/l/", &backupstore.DeleteOptions{DryRun: true, BypassGovernanceRetention: bypass})
		if err != nil {
			t.Fatal(err)
		}
		kept := map[string]backupstore.Retention{}
		for _, v := range dry.Versions {
			if v.Retention != nil {
				kept[v.Key+" "+v.VersionID] = *v.Retention
			}
		}
		wantKept := map[string]backupstore.Retention{
			"backups/l/comp " + comp: {Mode: "COMPLIANCE", RetainUntil: compUntil},
			"backups/l/hold " + hold: {LegalHold: true},
		}
		if !bypass {
			wantKept["backups/l/gov "+gov] = backupstore.Retention{Mode: "GOVERNANCE", RetainUntil: govUntil}
		}
		if diff := gocmp.Diff(wantKept, kept); diff != "" {
			t.Errorf("dry run (bypass %t): versions kept by the lock (-want +got):\n%s", bypass, diff)
		}
		if len(dry.Versions) != 2*40+4 {
			t.Errorf("dry run (bypass %t): %d versions listed, want 84 (80 free, 3 locked, 1 marker)", bypass, len(dry.Versions))
		}
	}

	res, err := backupstore.DeletePrefix(ctx, b, "backups/l/", nil)
	if !errors.Is(err, backupstore.ErrRetained) || !errors.Is(err, backupstore.ErrIncomplete) {
		t.Fatalf("DeletePrefix = %+v, %v; want ErrRetained and ErrIncomplete", res.DeleteProgress, err)
	}
	t.Logf("error: %v", err)
	var re *backupstore.RetainedError
	if !errors.As(err, &re) {
		t.Fatalf("%v is not a *RetainedError", err)
	}
	want := []backupstore.RetainedObject{
		{Key: "backups/l/comp", VersionID: comp, Retention: backupstore.Retention{Mode: "COMPLIANCE", RetainUntil: compUntil}},
		{Key: "backups/l/gov", VersionID: gov, Retention: backupstore.Retention{Mode: "GOVERNANCE", RetainUntil: govUntil}},
		{Key: "backups/l/hold", VersionID: hold, Retention: backupstore.Retention{LegalHold: true}},
	}
	got := slices.SortedFunc(slices.Values(re.Objects), func(a, b backupstore.RetainedObject) int { return strings.Compare(a.Key, b.Key) })
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("retained objects (-want +got):\n%s", diff)
	}
	if !re.RetryAt.Equal(govUntil) {
		t.Errorf("RetryAt = %v; want %v, the earliest retain-until", re.RetryAt, govUntil)
	}
	for _, s := range []string{"backups/l/comp", compUntil.Format(time.RFC3339), "legal hold"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
	wantLeft := []version{
		{Key: "backups/l/comp", VersionID: comp, Latest: true, Size: 32},
		{Key: "backups/l/gov", VersionID: gov, Latest: true, Size: 32}, // the marker above it is gone
		{Key: "backups/l/hold", VersionID: hold, Latest: true, Size: 32},
	}
	if diff := gocmp.Diff(wantLeft, versions(t, c, s.Bucket, "backups/l/")); diff != "" {
		t.Fatalf("versions left (-want +got):\n%s", diff)
	}
	if res.Deleted != 2*40+1 || res.Failed != 3 {
		t.Errorf("%+v; want 81 deleted (80 versions, 1 marker), 3 failed", res.DeleteProgress)
	}

	// A rerun before RetryAt makes no progress, and says so again.
	if _, err := backupstore.DeletePrefix(ctx, b, "backups/l/", nil); !errors.Is(err, backupstore.ErrRetained) {
		t.Errorf("rerun before RetryAt: %v; want ErrRetained", err)
	}

	// Lift the hold, come back when the retention periods are over.
	setHold(t, c, s.Bucket, "backups/l/hold", hold, s3types.ObjectLockLegalHoldStatusOff)
	time.Sleep(time.Until(compUntil) + time.Second)
	res, err = backupstore.DeletePrefix(ctx, b, "backups/l/", nil)
	if err != nil || res.Deleted != 3 {
		t.Fatalf("rerun after the retention: %+v, %v; want 3 deleted", res.DeleteProgress, err)
	}
	if left := versions(t, c, s.Bucket, "backups/l/"); len(left) != 0 {
		t.Errorf("versions left: %+v", left)
	}
	if got := versions(t, c, s.Bucket, "backups/l-other/"); len(got) != 1 || got[0].VersionID != sibling {
		t.Errorf("sibling versions %+v; want its one version", got)
	}
}

// TestDeletePrefixGovernanceBypass: a version under governance retention is
// deleted only with BypassGovernanceRetention; compliance retention holds
// even then.
func TestDeletePrefixGovernanceBypass(t *testing.T) {
	s := testenv.S3With(t, testenv.BucketOptions{ObjectLock: true})
	b := openStore(t, s)
	c := s3Client(t, b)
	ctx := context.Background()
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	lockKey(t, b, c, s.Bucket, "backups/g/gov", s3types.ObjectLockRetentionModeGovernance, until, false)
	comp := lockKey(t, b, c, s.Bucket, "backups/g/comp", s3types.ObjectLockRetentionModeCompliance, until, false)

	_, err := backupstore.DeletePrefix(ctx, b, "backups/g/", nil)
	var re *backupstore.RetainedError
	if !errors.As(err, &re) || len(re.Objects) != 2 {
		t.Fatalf("without the bypass: %v; want both versions retained", err)
	}
	if n := len(versions(t, c, s.Bucket, "backups/g/")); n != 2 {
		t.Fatalf("without the bypass %d versions left; want 2", n)
	}

	res, err := backupstore.DeletePrefix(ctx, b, "backups/g/", &backupstore.DeleteOptions{BypassGovernanceRetention: true})
	if !errors.As(err, &re) || len(re.Objects) != 1 || re.Objects[0].Key != "backups/g/comp" || re.Objects[0].Mode != "COMPLIANCE" || !re.RetryAt.Equal(until) {
		t.Fatalf("with the bypass: %+v, %v; want only the compliance version retained until %v", res.DeleteProgress, err, until)
	}
	if diff := gocmp.Diff([]version{{Key: "backups/g/comp", VersionID: comp, Latest: true, Size: 32}}, versions(t, c, s.Bucket, "backups/g/")); diff != "" {
		t.Errorf("versions left (-want +got):\n%s", diff)
	}
}

// TestDeletePrefixVersionedRefusesKeysOutsideThePrefix: the store answers
// the version listing of "backups/a/" with the versions of all of
// "backups/" (a broken store or proxy). DeletePrefix deletes the versions
// under its prefix and refuses every other one, naming it as failed, and
// the siblings' versions stay as they were.
func TestDeletePrefixVersionedRefusesKeysOutsideThePrefix(t *testing.T) {
	s := testenv.S3With(t, testenv.BucketOptions{Versioning: true})
	direct := openStore(t, s)
	c := s3Client(t, direct)
	nv, nm, _ := versionedFixture(t, direct, c, s.Bucket, "backups/a/", 20, 8)
	versionedFixture(t, direct, c, s.Bucket, "backups/ab/", 5, 8)
	siblingsBefore := versions(t, c, s.Bucket, "backups/ab/")
	p := proxytest.Start(t, s.Endpoint)
	p.SetHandler(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !r.URL.Query().Has("versions") {
			return false
		}
		var b strings.Builder
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><ListVersionsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><IsTruncated>false</IsTruncated>`)
		for _, v := range versions(t, c, s.Bucket, "backups/") {
			if v.Marker {
				fmt.Fprintf(&b, "<DeleteMarker><Key>%s</Key><VersionId>%s</VersionId><IsLatest>%v</IsLatest></DeleteMarker>", v.Key, v.VersionID, v.Latest)
			} else {
				fmt.Fprintf(&b, "<Version><Key>%s</Key><VersionId>%s</VersionId><IsLatest>%v</IsLatest><Size>%d</Size></Version>", v.Key, v.VersionID, v.Latest, v.Size)
			}
		}
		b.WriteString("</ListVersionsResult>")
		writeXML(w, b.String())
		return true
	})
	res, err := backupstore.DeletePrefix(context.Background(), viaProxy(t, s, p), "backups/a/", nil)
	var de *backupstore.DeleteError
	if !errors.As(err, &de) || len(de.Failed) != len(siblingsBefore) {
		t.Fatalf("DeletePrefix = %+v, %v; want the %d sibling versions refused", res.DeleteProgress, err, len(siblingsBefore))
	}
	for _, f := range de.Failed {
		if !strings.HasPrefix(f.Key, "backups/ab/") || !strings.Contains(f.Err.Error(), "not under the prefix") {
			t.Errorf("failed %v; want a sibling key refused as outside the prefix", f)
		}
	}
	if res.Deleted != nv+nm {
		t.Errorf("deleted %d; want %d", res.Deleted, nv+nm)
	}
	if left := versions(t, c, s.Bucket, "backups/a/"); len(left) != 0 {
		t.Errorf("%d versions left under the prefix", len(left))
	}
	if diff := gocmp.Diff(siblingsBefore, versions(t, c, s.Bucket, "backups/ab/")); diff != "" {
		t.Errorf("sibling versions changed (-before +after):\n%s", diff)
	}
}

// TestDeletePrefixVersionedCountsOnlyConfirmedVersions: the store answers
// every DeleteObjects of versions with Deleted entries that name the key
// but not the version (what a delete by key, which only writes a delete
// marker, returns). No version counts as deleted; all are named as failed.
func TestDeletePrefixVersionedCountsOnlyConfirmedVersions(t *testing.T) {
	s := testenv.S3With(t, testenv.BucketOptions{Versioning: true})
	direct := openStore(t, s)
	c := s3Client(t, direct)
	nv, nm, _ := versionedFixture(t, direct, c, s.Bucket, "backups/c/", 10, 8)
	before := versions(t, c, s.Bucket, "")
	p := proxytest.Start(t, s.Endpoint)
	p.SetHandler(func(w http.ResponseWriter, r *http.Request) bool {
		if !isDeleteObjects(r) {
			return false
		}
		var b strings.Builder
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
		for _, k := range deleteRequestKeys(t, r) {
			fmt.Fprintf(&b, "<Deleted><Key>%s</Key><DeleteMarker>true</DeleteMarker><DeleteMarkerVersionId>new</DeleteMarkerVersionId></Deleted>", k)
		}
		b.WriteString("</DeleteResult>")
		writeXML(w, b.String())
		return true
	})
	res, err := backupstore.DeletePrefix(context.Background(), viaProxy(t, s, p), "backups/c/", nil)
	var de *backupstore.DeleteError
	if !errors.As(err, &de) || int64(len(de.Failed)) != nv+nm || res.Deleted != 0 {
		t.Fatalf("DeletePrefix = %+v, %v; want all %d versions unconfirmed", res.DeleteProgress, err, nv+nm)
	}
	if !strings.Contains(de.Failed[0].Err.Error(), "does not confirm") || de.Failed[0].VersionID == "" {
		t.Errorf("failure %v; want the version named and its deletion unconfirmed", de.Failed[0])
	}
	if diff := gocmp.Diff(before, versions(t, c, s.Bucket, "")); diff != "" {
		t.Errorf("versions changed (-before +after):\n%s", diff)
	}
}

// gcsGeneration is what a test remembers of one GCS object generation.
type gcsGeneration struct {
	Key        string
	Generation int64
	Live       bool
	Size       int64
}

func generations(t testing.TB, b *blob.Bucket, bucket, prefix string) []gcsGeneration {
	t.Helper()
	var c *storage.Client
	if !b.As(&c) {
		t.Fatal("bucket is not a gcsblob bucket")
	}
	var out []gcsGeneration
	it := c.Bucket(bucket).Objects(context.Background(), &storage.Query{Prefix: prefix, Versions: true})
	for {
		a, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatalf("list generations under %q: %v", prefix, err)
		}
		out = append(out, gcsGeneration{Key: a.Name, Generation: a.Generation, Live: a.Deleted.IsZero(), Size: a.Size})
	}
	slices.SortFunc(out, func(a, b gcsGeneration) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return cmp.Compare(a.Generation, b.Generation)
	})
	return out
}

// TestDeletePrefixVersionedGCS: on a fake-gcs-server bucket with object
// versioning, DeletePrefix deletes every generation under the prefix, live
// or noncurrent (also of keys whose live object was deleted), and leaves a
// look-alike sibling prefix's generations as they were.
func TestDeletePrefixVersionedGCS(t *testing.T) {
	s := testenv.GCSWith(t, testenv.BucketOptions{Versioning: true})
	b := openStore(t, s)
	const n = 300
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("backups/a/%05d", i)
	}
	var bytes int64
	for v := range 3 {
		put(t, b, keys, 16+v)
		bytes += int64(n * (16 + v))
	}
	for i := 0; i < n; i += 3 {
		if err := b.Delete(context.Background(), keys[i]); err != nil { // the live object becomes noncurrent
			t.Fatal(err)
		}
	}
	put(t, b, []string{"backups/ab/00001", "backups/a-old/00001", "backups/a0/00001"}, 8)
	put(t, b, []string{"backups/ab/00001"}, 9)
	siblingsBefore := slices.DeleteFunc(generations(t, b, s.Bucket, ""), func(g gcsGeneration) bool { return strings.HasPrefix(g.Key, "backups/a/") })
	if len(siblingsBefore) != 4 {
		t.Fatalf("fixture: %d sibling generations", len(siblingsBefore))
	}

	dry, err := backupstore.DeletePrefix(context.Background(), b, "backups/a/", &backupstore.DeleteOptions{DryRun: true})
	if err != nil || !dry.Versioned || len(dry.Versions) != 3*n || dry.Bytes != bytes || len(dry.Keys) != n {
		t.Fatalf("dry run: %v, versioned %v, %d versions, %d bytes, %d keys; want %d versions, %d bytes, %d keys", err, dry.Versioned, len(dry.Versions), dry.Bytes, len(dry.Keys), 3*n, bytes, n)
	}
	start := time.Now()
	res, err := backupstore.DeletePrefix(context.Background(), b, "backups/a/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted %d generations in %v (%s)", res.Deleted, time.Since(start), res.Method)
	if !res.Versioned || res.Method != "per-version" || res.Deleted != 3*n || res.DeletedBytes != bytes {
		t.Errorf("%+v, method %q; want %d generations, %d bytes deleted, per-version", res.DeleteProgress, res.Method, 3*n, bytes)
	}
	if left := generations(t, b, s.Bucket, "backups/a/"); len(left) != 0 {
		t.Errorf("%d generations left under the prefix, first %+v", len(left), left[0])
	}
	if diff := gocmp.Diff(siblingsBefore, generations(t, b, s.Bucket, "")); diff != "" {
		t.Errorf("generations outside the prefix changed (-before +after):\n%s", diff)
	}
}

// TestCopyBackupsToALockedBucket: CopyBackups into a bucket with Object
// Lock and a default retention (every object written gets one) skips what
// the target already has, even retained, and writes the rest; a key whose
// retained version differs is not written (ErrTargetDiffers), and keeps
// its one version. A rerun copies nothing and refuses that key again.
func TestCopyBackupsToALockedBucket(t *testing.T) {
	srcStore, dstStore := testenv.S3(t), testenv.S3With(t, testenv.BucketOptions{ObjectLock: true})
	src, dst := openStore(t, srcStore), openStore(t, dstStore)
	c := s3Client(t, dst)
	ctx := context.Background()
	keys := fill(t, src, "etcd/main/", 5, 100)
	until := time.Now().Add(time.Hour)
	// key 0 is there already, identical and retained; key 1 is there,
	// different and retained.
	same := lockKey(t, dst, c, dstStore.Bucket, "etcd/main/00000", s3types.ObjectLockRetentionModeCompliance, until, false)
	if err := dst.Delete(ctx, "etcd/main/00000"); err != nil { // lockKey wrote 32 bytes: write the source's on top
		t.Fatal(err)
	}
	put(t, dst, keys[:1], 100)
	other := lockKey(t, dst, c, dstStore.Bucket, "etcd/main/00001", s3types.ObjectLockRetentionModeCompliance, until, false)
	// From now on every object written is retained for a day.
	if _, err := c.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{
		Bucket: aws.String(dstStore.Bucket),
		ObjectLockConfiguration: &s3types.ObjectLockConfiguration{
			ObjectLockEnabled: s3types.ObjectLockEnabledEnabled,
			Rule:              &s3types.ObjectLockRule{DefaultRetention: &s3types.DefaultRetention{Mode: s3types.ObjectLockRetentionModeGovernance, Days: aws.Int32(1)}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	opts := &backupstore.CopyOptions{SourcePrefix: "etcd/main/", TargetPrefix: "etcd/main/", ManifestKey: "manifest.json"}
	res, err := backupstore.CopyBackups(ctx, src, dst, opts)
	if !errors.Is(err, backupstore.ErrTargetDiffers) || !strings.Contains(err.Error(), "etcd/main/00001") || res.Skipped != 1 || res.Copied != 3 {
		t.Fatalf("CopyBackups: %+v, %v; want 1 skipped, 3 copied, etcd/main/00001 refused", res.CopyProgress, err)
	}
	checkContents(t, dst, append([]string{keys[0]}, keys[2:]...), 100)
	vs := versions(t, c, dstStore.Bucket, "etcd/main/00001")
	if len(vs) != 1 || vs[0].VersionID != other {
		t.Errorf("versions of the conflicting key: %+v; want the retained one alone", vs)
	}
	if !slices.ContainsFunc(versions(t, c, dstStore.Bucket, "etcd/main/00000"), func(v version) bool { return v.VersionID == same }) {
		t.Error("the retained version of key 0 is gone")
	}
	res, err = backupstore.CopyBackups(ctx, src, dst, opts)
	if !errors.Is(err, backupstore.ErrTargetDiffers) || res.Copied != 0 || res.Skipped != 4 {
		t.Errorf("rerun: %+v, %v; want everything else skipped, etcd/main/00001 refused", res.CopyProgress, err)
	}
}
