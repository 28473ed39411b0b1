package backupstore_test

import (
	"context"
	"testing"

	"gocloud.dev/gcerrors"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// A marker never replaces another, on every store: the second WriteMarker
// of one key fails with gcerrors.FailedPrecondition, and the marker still
// names its first owner, with its first content. fileblob writes an
// object's metadata beside it before it checks IfNotExist, so a losing
// write replaced the owner there while the content stayed.
func TestWriteMarkerNeverReplacesAnother(t *testing.T) {
	ctx := context.Background()
	for _, store := range []*testenv.BlobStore{testenv.File(t), testenv.Mem(t), testenv.S3(t), testenv.GCS(t), testenv.Azure(t)} {
		t.Run(store.Scheme, func(t *testing.T) {
			b, err := backupstore.OpenBucket(ctx, store.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			const key = "db/.groundskeeper-entry"
			if err := backupstore.WriteMarker(ctx, b, key, "uid-a", []byte("a's")); err != nil {
				t.Fatal(err)
			}
			err = backupstore.WriteMarker(ctx, b, key, "uid-b", []byte("b's"))
			if gcerrors.Code(err) != gcerrors.FailedPrecondition {
				t.Errorf("the second marker: %v (%v); want FailedPrecondition", err, gcerrors.Code(err))
			}
			owner, found, err := backupstore.MarkerOwner(ctx, b, key)
			if err != nil {
				t.Fatal(err)
			}
			data, err := b.ReadAll(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if !found || owner != "uid-a" || string(data) != "a's" {
				t.Errorf("the marker names %q (found %t) and holds %q; want uid-a's, as first written", owner, found, data)
			}
		})
	}
}
