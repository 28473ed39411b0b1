package share

import (
	"context"
	"fmt"
	"strings"

	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// ErrBucketFull is returned by Quota.Admit when a shared bucket already
// holds its limit of entries.
var ErrBucketFull = errclass.Retryable("share: bucket holds its limit of entries")

// EntryPrefix returns the prefix of one entry in a shared bucket:
// root + entry + "/", where root is empty or ends in backupstore.Separator.
// The entry must be a single non-empty path segment, and the result passes
// backupstore.CheckPrefix, so it can be given to DeletePrefix as it is; an
// entry that is a prefix of another ("a" and "ab") never selects the
// other's objects. [PrefixOf] is the entry prefix of an entry resource.
func EntryPrefix(root, entry string) (string, error) {
	if err := checkRoot(root); err != nil {
		return "", err
	}
	if entry == "" || strings.Contains(entry, backupstore.Separator) {
		return "", &backupstore.PrefixError{Prefix: root + entry, Reason: fmt.Sprintf("entry %q must be one non-empty path segment", entry)}
	}
	p := root + entry + backupstore.Separator
	if err := backupstore.CheckPrefix(p, backupstore.PrefixRules{}); err != nil {
		return "", err
	}
	return p, nil
}

func checkRoot(root string) error {
	if root != "" && !strings.HasSuffix(root, backupstore.Separator) {
		return &backupstore.PrefixError{Prefix: root, Reason: "root must be empty or end in " + backupstore.Separator}
	}
	return nil
}

// entriesPageSize is the page size of Entries' listing: one request per
// 1,000 entries on every store.
const entriesPageSize = 1000

// Entries lists the entries (the first path segment below root) of a shared
// bucket. root is empty or ends in backupstore.Separator, as for
// EntryPrefix: a root such as "etcd" would also list the entries under
// "etcd-old/". It costs one listing request per 1,000 entries.
func Entries(ctx context.Context, b *blob.Bucket, root string) ([]string, error) {
	if err := checkRoot(root); err != nil {
		return nil, err
	}
	var out []string
	token := blob.FirstPageToken
	for {
		objs, next, err := b.ListPage(ctx, token, entriesPageSize, &blob.ListOptions{Prefix: root, Delimiter: backupstore.Separator})
		if err != nil {
			return nil, fmt.Errorf("share: list entries under %q: %w", root, err)
		}
		for _, o := range objs {
			if o.IsDir {
				out = append(out, strings.TrimSuffix(strings.TrimPrefix(o.Key, root), backupstore.Separator))
			}
		}
		if len(next) == 0 {
			return out, nil
		}
		token = next
	}
}

// Quota limits the entries of a shared bucket, as Gardener's
// controller.backupInfrastructure.quota does per provider. A Share admits
// entries with one (its Config.Limit); use it alone to admit entries of
// your own naming.
type Quota struct {
	// Root is the prefix under which the entries are, empty or ending in
	// backupstore.Separator.
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
// when admitting it (backupstore.WriteMarker), so an entry with no backups
// yet holds its place.
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
