package backupstore

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	"gocloud.dev/gcerrors"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// ErrBucketFull is returned by Quota.Admit when a shared bucket already
// holds its limit of entries.
var ErrBucketFull = errclass.Retryable("backupstore: bucket holds its limit of entries")

// EntryName is the name of the backup entry of a cluster in a shared bucket,
// following Gardener's BackupEntry naming: the cluster's technical ID (the
// seed namespace, "shoot--project--name"), "--", and its UID. The UID keeps
// entries of a deleted cluster and of a new one of the same name apart.
func EntryName(technicalID, uid string) string {
	return technicalID + "--" + uid
}

// EntryPrefix returns the prefix of one entry in a shared bucket:
// root + entry + "/", where root is empty or ends in Separator. The entry
// must be a single non-empty path segment, and the result passes
// CheckPrefix, so it can be given to DeletePrefix as it is; an entry that
// is a prefix of another ("a" and "ab") never selects the other's objects.
func EntryPrefix(root, entry string) (string, error) {
	if root != "" && !strings.HasSuffix(root, Separator) {
		return "", &PrefixError{Prefix: root, Reason: "root must be empty or end in " + Separator}
	}
	if entry == "" || strings.Contains(entry, Separator) {
		return "", &PrefixError{Prefix: root + entry, Reason: fmt.Sprintf("entry %q must be one non-empty path segment", entry)}
	}
	p := root + entry + Separator
	if err := CheckPrefix(p, PrefixRules{}); err != nil {
		return "", err
	}
	return p, nil
}

// Entries lists the entries (the first path segment below root) of a shared
// bucket. root is empty or ends in Separator, as for EntryPrefix: a root
// such as "etcd" would also list the entries under "etcd-old/". It costs
// one listing request per 1,000 entries.
func Entries(ctx context.Context, b *blob.Bucket, root string) ([]string, error) {
	if root != "" && !strings.HasSuffix(root, Separator) {
		return nil, &PrefixError{Prefix: root, Reason: "root must be empty or end in " + Separator}
	}
	var out []string
	token := blob.FirstPageToken
	for {
		objs, next, err := b.ListPage(ctx, token, listAllPageSize, &blob.ListOptions{Prefix: root, Delimiter: Separator})
		if err != nil {
			return nil, fmt.Errorf("backupstore: list entries under %q: %w", root, err)
		}
		for _, o := range objs {
			if o.IsDir {
				out = append(out, strings.TrimSuffix(strings.TrimPrefix(o.Key, root), Separator))
			}
		}
		if len(next) == 0 {
			return out, nil
		}
		token = next
	}
}

// Quota limits the entries of a shared bucket, as Gardener's
// controller.backupInfrastructure.quota does per provider.
type Quota struct {
	// Root is the prefix under which the entries are, empty or ending in
	// Separator.
	Root string
	// Limit is the most entries a bucket may hold; 0 means no limit.
	Limit int
}

// Admit reports whether entry may be placed in b: it may when it is there
// already or when the bucket holds fewer than Limit entries. It returns the
// number of entries counted and, when the bucket is full, an error wrapping
// ErrBucketFull, so the caller can open another bucket. Two callers racing
// for the last place may both be admitted: serialize admissions (a lock, or
// one controller) where the limit is hard.
//
// An entry is counted once an object exists under its prefix: object stores
// have no empty directories. Write a marker object under the entry's prefix
// when admitting it, so an entry with no backups yet holds its place.
func (q Quota) Admit(ctx context.Context, b *blob.Bucket, entry string) (int, error) {
	if _, err := EntryPrefix(q.Root, entry); err != nil {
		return 0, err
	}
	entries, err := Entries(ctx, b, q.Root)
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		if e == entry {
			return len(entries), nil
		}
	}
	if q.Limit > 0 && len(entries) >= q.Limit {
		return len(entries), fmt.Errorf("%w: %d of %d entries under %q", ErrBucketFull, len(entries), q.Limit, q.Root)
	}
	return len(entries), nil
}

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
