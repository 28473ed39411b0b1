package backupstore

import (
	"context"
	"fmt"
	"os"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

// MetadataOwner is the metadata key of a marker object (WriteMarker) that
// names the marker's owner.
const MetadataOwner = "groundskeeper-owner"

// WriteMarker writes the marker object key of owner into b, with content
// as its data and owner in its metadata (MetadataOwner): the record,
// where the data is, of whose a prefix (or a bucket) is, made when it is
// given out. owner is an identity that cannot be spelled two ways, such as
// the UID of the Kubernetes object the prefix belongs to. An empty owner
// is refused. The write is conditional (blob.WriterOptions.IfNotExist): a
// marker never replaces another, so two writers that both found none
// cannot both own the prefix; the loser's error is
// gcerrors.FailedPrecondition, and it reads the marker again (MarkerOwner).
//
// On the local file system (fileblob) the check is not one request
// (ifNotExist): two writers at the same moment may both succeed there.
func WriteMarker(ctx context.Context, b *blob.Bucket, key, owner string, content []byte) error {
	if owner == "" {
		return fmt.Errorf("%w: marker %q: empty owner", ErrInvalidConfig, key)
	}
	opts := &blob.WriterOptions{Metadata: map[string]string{MetadataOwner: owner}}
	result := ifNotExist(ctx, b, key, opts)
	err := result(b.WriteAll(ctx, key, content, opts))
	if driver.IsExists(err) && gcerrors.Code(err) != gcerrors.FailedPrecondition {
		// S3's 412, which gocloud's s3blob reports as NotFound when the
		// error's text (its request or host ID) contains "301".
		err = fmt.Errorf("backupstore: marker %q exists: not written over: %w: %w", key, errExists(), err)
	}
	return err
}

// ifNotExist makes opts a conditional write of key into b
// (blob.WriterOptions.IfNotExist), which never writes over an object, and
// returns what to make of the write's error. On the local file system
// (fileblob), whose write checks IfNotExist with a stat before its rename
// and writes the metadata file beside the object before that check, so
// that a write that fails would still replace the metadata of the object
// it lost to (a marker's owner, a copy's source time), it asks whether key
// exists right before fileblob writes anything, and writes nothing when
// it does; the write's error is then one of gcerrors.FailedPrecondition,
// as another store's. Two writers at the same moment may still both pass
// that check there, as they pass fileblob's. opts.BeforeWrite must be nil.
func ifNotExist(ctx context.Context, b *blob.Bucket, key string, opts *blob.WriterOptions) (result func(error) error) {
	opts.IfNotExist = true
	var exists error
	opts.BeforeWrite = func(as func(any) bool) error {
		var f *os.File
		if !as(&f) {
			return nil // a store whose conditional write is one request
		}
		// fileblob: its temporary file is open, nothing else written.
		ok, err := b.Exists(ctx, key)
		if err != nil || !ok {
			return err
		}
		_ = f.Close()
		_ = os.Remove(f.Name())
		exists = fmt.Errorf("backupstore: %q exists: not written over: %w", key, errExists())
		return exists
	}
	return func(err error) error {
		if exists != nil && err != nil {
			return exists
		}
		return err
	}
}

// errExists is a failed IfNotExist write's error (its gcerrors.Code is
// FailedPrecondition), which ifNotExist returns where it finds the object
// itself: gocloud gives no other way to make an error of that code. Made
// once, on first use, by memblob (TestWriteMarkerNeverReplacesAnother
// checks the code).
var errExists = sync.OnceValue(func() error {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	_ = b.WriteAll(ctx, "marker", nil, nil)
	return b.WriteAll(ctx, "marker", nil, &blob.WriterOptions{IfNotExist: true})
})

// MarkerOwner reads the owner that the marker object key in b names
// (WriteMarker). found is false when there is no such object; a marker
// written without an owner (by something other than WriteMarker) is found
// with owner "".
func MarkerOwner(ctx context.Context, b *blob.Bucket, key string) (owner string, found bool, err error) {
	a, err := b.Attributes(ctx, key)
	if notFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("backupstore: read marker %q: %w", key, err)
	}
	return a.Metadata[MetadataOwner], true, nil
}

// Empty reports whether b holds no object under prefix (one listing
// request).
func Empty(ctx context.Context, b *blob.Bucket, prefix string) (bool, error) {
	objs, _, err := b.ListPage(ctx, blob.FirstPageToken, 1, &blob.ListOptions{Prefix: prefix})
	if err != nil {
		return false, fmt.Errorf("backupstore: list %q: %w", prefix, err)
	}
	return len(objs) == 0, nil
}
