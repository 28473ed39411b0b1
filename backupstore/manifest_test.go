package backupstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// takenFromNameOrModTime reads the time out of a snapshot name, and uses
// the modification time for any other key (as a Backup func that does not
// know manifests would).
func takenFromNameOrModTime(key string, mod time.Time) (string, time.Time) {
	if id, taken := takenFromName(key, mod); !taken.IsZero() {
		return id, taken
	}
	return key, mod
}

func readManifest(t *testing.T, b interface {
	ReadAll(context.Context, string) ([]byte, error)
}, key string) *backupstore.Manifest {
	t.Helper()
	data, err := b.ReadAll(context.Background(), key)
	if err != nil {
		t.Fatalf("read manifest %s: %v", key, err)
	}
	var m backupstore.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("manifest %s: %v", key, err)
	}
	return &m
}

func manifestKeys(m *backupstore.Manifest) []string {
	var keys []string
	for _, e := range m.Entries {
		keys = append(keys, e.Key+"="+string(e.Status))
	}
	return keys
}

// TestCopyChainedMigrationNeverCopiesTheManifest: A to B, then B to C, with
// the same ManifestKey. B holds the first copy's manifest, newer than every
// backup; it is not a backup, so it is never selected (MaxBackups counts
// the snapshots only) and never written over C's own manifest.
func TestCopyChainedMigrationNeverCopiesTheManifest(t *testing.T) {
	a, b, c := openStore(t, allStores[0].open(t)), openStore(t, allStores[1].open(t)), openStore(t, allStores[2].open(t))
	now := time.Now()
	keys := []string{snapshotName(1, now.Add(-48*time.Hour)), snapshotName(2, now.Add(-24*time.Hour))}
	put(t, a, keys, 100)
	ctx := context.Background()
	opts := &backupstore.CopyOptions{MaxBackups: 2, Backup: takenFromNameOrModTime, ManifestKey: "migration.json"}
	if res, err := backupstore.CopyBackups(ctx, a, b, opts); err != nil || res.Copied != 2 {
		t.Fatalf("A to B: %+v, %v; want 2 copied", res.CopyProgress, err)
	}
	res, err := backupstore.CopyBackups(ctx, b, c, opts)
	if err != nil {
		t.Fatalf("B to C: %v", err)
	}
	if res.Copied != 2 || res.Excluded != 0 {
		t.Errorf("B to C: %+v, excluded %d; want both snapshots copied, nothing excluded", res.CopyProgress, res.Excluded)
	}
	checkContents(t, c, keys, 100)
	want := []string{keys[0] + "=Copied", keys[1] + "=Copied"}
	if diff := cmp.Diff(want, manifestKeys(res.Manifest)); diff != "" {
		t.Errorf("B to C manifest (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, manifestKeys(readManifest(t, c, "migration.json"))); diff != "" {
		t.Errorf("C's stored manifest (-want +got):\n%s", diff)
	}
}

// TestCopyRefusesToWriteDataOverTheManifest: a source object whose target
// key is ManifestKey is refused before anything is written.
func TestCopyRefusesToWriteDataOverTheManifest(t *testing.T) {
	src, dst := openURL(t, "mem://", nil), openURL(t, "mem://", nil)
	put(t, src, []string{"a/Full-1", "a/m.json"}, 10)
	_, err := backupstore.CopyBackups(context.Background(), src, dst, &backupstore.CopyOptions{SourcePrefix: "a/", ManifestKey: "m.json"})
	if err == nil || !strings.Contains(err.Error(), `"a/m.json"`) || !strings.Contains(err.Error(), `ManifestKey = "m.json"`) {
		t.Errorf("CopyBackups = %v; want an error naming the source key and ManifestKey", err)
	}
	if got := snapshot(t, dst, ""); len(got) != 0 {
		t.Errorf("target holds %v; want nothing written", slices.Sorted(maps.Keys(got)))
	}
}

// TestCopyManifestRecordsOnlyWhatIsKnown: a rerun after an interruption
// whose filters now exclude entries still None does not record them
// NotFound (they are still in the source), and a manifest of a copy with
// other prefixes is neither merged nor overwritten.
func TestCopyManifestRecordsOnlyWhatIsKnown(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	keys := []string{snapshotName(1, now.Add(-3*time.Hour)), snapshotName(2, now.Add(-2*time.Hour)), snapshotName(3, now.Add(-time.Hour))}
	ctx := context.Background()
	writeManifest := func(t *testing.T, dst interface {
		WriteAll(context.Context, string, []byte, *blob.WriterOptions) error
	}, m backupstore.Manifest) []byte {
		t.Helper()
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.WriteAll(ctx, "manifest.json", data, nil); err != nil {
			t.Fatal(err)
		}
		return data
	}
	t.Run("an interrupted entry now excluded by the filters is not recorded NotFound", func(t *testing.T) {
		src, dst := openURL(t, "mem://", nil), openURL(t, "mem://", nil)
		put(t, src, keys, 10)
		// What an interrupted run with no filters leaves: every entry None.
		var m backupstore.Manifest
		for _, k := range keys {
			m.Entries = append(m.Entries, backupstore.ManifestEntry{Key: k, Size: 10, Status: backupstore.StatusNone})
		}
		writeManifest(t, dst, m)
		res, err := backupstore.CopyBackups(ctx, src, dst, &backupstore.CopyOptions{
			MaxBackups: 1, Backup: takenFromName, ManifestKey: "manifest.json"})
		if err != nil {
			t.Fatal(err)
		}
		if res.NotFound != 0 || res.Copied != 1 {
			t.Errorf("%+v; want the newest copied and nothing NotFound", res.CopyProgress)
		}
		want := []string{keys[2] + "=Copied"}
		if diff := cmp.Diff(want, manifestKeys(readManifest(t, dst, "manifest.json"))); diff != "" {
			t.Errorf("manifest (-want +got):\n%s", diff)
		}
	})
	t.Run("a manifest of a copy with other prefixes is not merged", func(t *testing.T) {
		src, dst := openURL(t, "mem://", nil), openURL(t, "mem://", nil)
		put(t, src, keys, 10)
		foreign := writeManifest(t, dst, backupstore.Manifest{SourcePrefix: "other/", TargetPrefix: "x/",
			Entries: []backupstore.ManifestEntry{{Key: "other/Full-1", Size: 10, Status: backupstore.StatusNone}}})
		res, err := backupstore.CopyBackups(ctx, src, dst, &backupstore.CopyOptions{SourcePrefix: "backups/", ManifestKey: "manifest.json"})
		if err == nil || !strings.Contains(err.Error(), `SourcePrefix = "other/"`) {
			t.Errorf("CopyBackups = %+v, %v; want an error naming the manifest's SourcePrefix", res, err)
		}
		got, _ := dst.ReadAll(ctx, "manifest.json")
		if string(got) != string(foreign) {
			t.Errorf("the other copy's manifest was changed:\n%s", got)
		}
		if n := len(snapshot(t, dst, "")); n != 1 {
			t.Errorf("target holds %d objects; want only the manifest", n)
		}
	})
}

// TestCopyRefusesPrefixesThatReachSiblings: a TargetPrefix without its
// trailing "/" would write "b/x" over tenant-ab's "tenant-ab/x", and a
// SourcePrefix without it would copy another tenant's backups.
func TestCopyRefusesPrefixesThatReachSiblings(t *testing.T) {
	for _, tc := range []struct{ field, source, target string }{
		{"TargetPrefix", "", "tenant-a"},
		{"SourcePrefix", "tenant-a", "copy/"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			src, dst := openURL(t, "mem://", nil), openURL(t, "mem://", nil)
			put(t, src, []string{"b/x", "tenant-ab/secret"}, 10)
			put(t, dst, []string{"tenant-ab/x"}, 20)
			before := snapshot(t, dst, "")
			_, err := backupstore.CopyBackups(context.Background(), src, dst, &backupstore.CopyOptions{SourcePrefix: tc.source, TargetPrefix: tc.target})
			if !errors.Is(err, backupstore.ErrUnsafePrefix) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), `"tenant-a"`) {
				t.Errorf("CopyBackups = %v; want ErrUnsafePrefix naming %s and its value", err, tc.field)
			}
			if diff := cmp.Diff(before, snapshot(t, dst, "")); diff != "" {
				t.Errorf("target changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestCopyChainedMigrationWithManifestsBesideTheDataSkipsTheManifest: A
// a/ to B b/ keeps its manifest with the data (b/m.json); then B b/ to C
// c/ with MaxBackups. B's manifest, the newest object under b/, is not a
// backup: it is neither copied to C nor given one of the MaxBackups places,
// whatever ManifestKey the second copy uses (c/m.json, where b/m.json
// would land, or another key).
func TestCopyChainedMigrationWithManifestsBesideTheDataSkipsTheManifest(t *testing.T) {
	now := time.Now()
	keys := []string{"a/Full-00000001-00000002-" + strconv.FormatInt(now.Add(-72*time.Hour).Unix(), 10),
		"a/Full-00000002-00000003-" + strconv.FormatInt(now.Add(-48*time.Hour).Unix(), 10),
		"a/Full-00000003-00000004-" + strconv.FormatInt(now.Add(-24*time.Hour).Unix(), 10)}
	for _, manifestKey := range []string{"c/m.json", "c/other.json"} {
		t.Run("second ManifestKey "+manifestKey, func(t *testing.T) {
			a, b, c := openURL(t, "mem://", nil), openURL(t, "mem://", nil), openURL(t, "mem://", nil)
			put(t, a, keys, 100)
			ctx := context.Background()
			res, err := backupstore.CopyBackups(ctx, a, b, &backupstore.CopyOptions{SourcePrefix: "a/", TargetPrefix: "b/",
				MaxBackups: 3, Backup: takenFromNameOrModTime, ManifestKey: "b/m.json"})
			if err != nil || res.Copied != 3 {
				t.Fatalf("A to B: %+v, %v; want 3 copied", res.CopyProgress, err)
			}
			res, err = backupstore.CopyBackups(ctx, b, c, &backupstore.CopyOptions{SourcePrefix: "b/", TargetPrefix: "c/",
				MaxBackups: 2, Backup: takenFromNameOrModTime, ManifestKey: manifestKey})
			if err != nil {
				t.Fatalf("B to C: %v", err)
			}
			want := []string{"c/" + strings.TrimPrefix(keys[1], "a/"), "c/" + strings.TrimPrefix(keys[2], "a/"), manifestKey}
			slices.Sort(want)
			got := slices.Sorted(maps.Keys(snapshot(t, c, "")))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("C holds (-want +got):\n%s", diff)
			}
			if res.Copied != 2 || res.Excluded != 1 {
				t.Errorf("B to C: %+v, excluded %d; want the two newest snapshots copied and the oldest excluded", res.CopyProgress, res.Excluded)
			}
			for _, e := range res.Manifest.Entries {
				if strings.HasSuffix(e.Key, ".json") {
					t.Errorf("B to C manifest lists %q", e.Key)
				}
			}
		})
	}
}

// TestCopyRecognisesAManifestWrittenWithoutTheMarker: a manifest written as
// JSON before manifests carried MetadataManifest is recognised by its
// format, and an ordinary JSON object is still copied.
func TestCopyRecognisesAManifestWrittenWithoutTheMarker(t *testing.T) {
	ctx := context.Background()
	src, dst := openURL(t, "mem://", nil), openURL(t, "mem://", nil)
	old, _ := json.Marshal(backupstore.Manifest{SourcePrefix: "x/", TargetPrefix: "b/", Entries: []backupstore.ManifestEntry{{Key: "x/1", Size: 1, Status: backupstore.StatusCopied}}})
	json := &blob.WriterOptions{ContentType: "application/json"}
	if err := src.WriteAll(ctx, "b/old-manifest.json", old, json); err != nil {
		t.Fatal(err)
	}
	if err := src.WriteAll(ctx, "b/config.json", []byte(`{"sourcePrefix":"x/","entries":[],"retention":3}`), json); err != nil {
		t.Fatal(err)
	}
	res, err := backupstore.CopyBackups(ctx, src, dst, &backupstore.CopyOptions{SourcePrefix: "b/", TargetPrefix: "c/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(snapshot(t, dst, ""))); !slices.Equal(got, []string{"c/config.json"}) {
		t.Errorf("target holds %q (result %+v); want only c/config.json", got, res.CopyProgress)
	}
}

// TestCopyRefusesABucketPrefixThatReachesSiblings: through a bucket opened
// with prefix=tenant-a (no trailing "/"), TargetPrefix "b/" is tenant-ab's
// "tenant-ab/": the copy would write over another tenant's keys, and a
// SourcePrefix "" would copy another tenant's backups. Both are refused
// before anything is written.
func TestCopyRefusesABucketPrefixThatReachesSiblings(t *testing.T) {
	ctx := context.Background()
	s := testenv.File(t)
	direct := openStore(t, s)
	put(t, direct, []string{"src/x/1", "tenant-ab/1", "tenant-a/x/1"}, 8)
	before := snapshot(t, direct, "")
	for _, tc := range []struct {
		field    string
		src, dst *blob.Bucket
		opts     backupstore.CopyOptions
	}{
		{"TargetPrefix", openURL(t, withParam(s.URL, "prefix=src/"), nil), openURL(t, withParam(s.URL, "prefix=tenant-a"), nil), backupstore.CopyOptions{TargetPrefix: "b/"}},
		{"SourcePrefix", openURL(t, withParam(s.URL, "prefix=tenant-a"), nil), openURL(t, withParam(s.URL, "prefix=copy/"), nil), backupstore.CopyOptions{}},
	} {
		_, err := backupstore.CopyBackups(ctx, tc.src, tc.dst, &tc.opts)
		if !errors.Is(err, backupstore.ErrUnsafePrefix) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), `"tenant-a"`) {
			t.Errorf("%s: CopyBackups = %v; want ErrUnsafePrefix naming %s and the bucket prefix", tc.field, err, tc.field)
		}
	}
	if diff := cmp.Diff(before, snapshot(t, direct, "")); diff != "" {
		t.Errorf("a refused copy changed the store (-before +after):\n%s", diff)
	}
}

// TestCopyDryRunWritesNothing: a dry run says what a copy would write,
// naming the target keys it would write over, and writes nothing.
func TestCopyDryRunWritesNothing(t *testing.T) {
	ctx := context.Background()
	src, dst := openURL(t, "mem://", nil), openURL(t, "mem://", nil)
	put(t, src, []string{"a/1", "a/2", "a/3"}, 10)
	put(t, dst, []string{"b/2"}, 20)                                          // other content: would be written over
	put(t, dst, []string{"b/3"}, 10)                                          // wrong key's content, same size: MD5 differs
	if err := dst.WriteAll(ctx, "b/1", content("a/1", 10), nil); err != nil { // the same: skipped
		t.Fatal(err)
	}
	before := snapshot(t, dst, "")
	res, err := backupstore.CopyBackups(ctx, src, dst, &backupstore.CopyOptions{SourcePrefix: "a/", TargetPrefix: "b/", ManifestKey: "m.json", DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a/1=Copied", "a/2=None", "a/3=None"}, manifestKeys(res.Manifest)); diff != "" {
		t.Errorf("dry run manifest (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b/2", "b/3"}, res.Overwrites); diff != "" {
		t.Errorf("Overwrites (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, snapshot(t, dst, "")); diff != "" {
		t.Errorf("a dry run changed the target (-before +after):\n%s", diff)
	}
}

// TestCopyFromS3RecognisesManifestsAsItReads: without filters, an S3
// source's manifests are recognised from what the read of each object
// brings, not by a request beforehand: a manifest an earlier copy wrote
// (with MetadataManifest, its target key the new ManifestKey), one marked
// but not JSON, one written as JSON without the marker, and one the target
// already holds are not
// copied, listed or counted; an ordinary JSON object is copied.
func TestCopyFromS3RecognisesManifestsAsItReads(t *testing.T) {
	ctx := context.Background()
	a, src, dst := openURL(t, "mem://", nil), openStore(t, testenv.S3(t)), openURL(t, "mem://", nil)
	put(t, a, []string{"a/Full-1", "a/Full-2"}, 100)
	if res, err := backupstore.CopyBackups(ctx, a, src, &backupstore.CopyOptions{SourcePrefix: "a/", TargetPrefix: "b/", ManifestKey: "b/m.json"}); err != nil || res.Copied != 2 {
		t.Fatalf("A to the source: %+v, %v; want 2 copied", res.CopyProgress, err)
	}
	old, _ := json.Marshal(backupstore.Manifest{SourcePrefix: "x/", TargetPrefix: "b/", Entries: []backupstore.ManifestEntry{{Key: "x/1", Size: 1, Status: backupstore.StatusCopied}}})
	asJSON := &blob.WriterOptions{ContentType: "application/json"}
	for _, w := range []struct {
		b    *blob.Bucket
		key  string
		data []byte
	}{
		{src, "b/old-manifest.json", old},
		{src, "b/present-manifest.json", old},
		{dst, "c/present-manifest.json", old},
		{src, "b/config.json", []byte(`{"sourcePrefix":"x/","entries":[],"retention":3}`)},
	} {
		if err := w.b.WriteAll(ctx, w.key, w.data, asJSON); err != nil {
			t.Fatal(err)
		}
	}
	// Marked, but not JSON: only the marker tells.
	if err := src.WriteAll(ctx, "b/marked", old, &blob.WriterOptions{ContentType: "application/octet-stream",
		Metadata: map[string]string{backupstore.MetadataManifest: "1"}}); err != nil {
		t.Fatal(err)
	}
	res, err := backupstore.CopyBackups(ctx, src, dst, &backupstore.CopyOptions{SourcePrefix: "b/", TargetPrefix: "c/", ManifestKey: "c/m.json"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"c/Full-1", "c/Full-2", "c/config.json", "c/m.json", "c/present-manifest.json"}
	if got := slices.Sorted(maps.Keys(snapshot(t, dst, ""))); !slices.Equal(got, want) {
		t.Errorf("target holds %q; want %q", got, want)
	}
	if res.Selected != 3 || res.Copied != 3 || res.Skipped != 0 || res.Excluded != 0 || len(res.Overwrites) != 0 {
		t.Errorf("result %+v, excluded %d, overwrites %q; want 3 selected and copied, nothing else", res.CopyProgress, res.Excluded, res.Overwrites)
	}
	wantEntries := []string{"b/Full-1=Copied", "b/Full-2=Copied", "b/config.json=Copied"}
	if diff := cmp.Diff(wantEntries, manifestKeys(res.Manifest)); diff != "" {
		t.Errorf("manifest (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantEntries, manifestKeys(readManifest(t, dst, "c/m.json"))); diff != "" {
		t.Errorf("stored manifest (-want +got):\n%s", diff)
	}
}
