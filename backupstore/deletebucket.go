package backupstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

// DeleteBucket deletes the bucket (container) that rawURL names, with the
// credentials creds as OpenBucket takes them: first everything in it
// (DeletePrefix of the whole bucket: on a versioned bucket every version
// and delete marker), then the bucket itself through the provider's API.
// A pool of shared buckets shrinks by one this way (backupstore/share/pool.Pool).
// A bucket that does not exist is not an error (the result is empty), so a
// retried deletion succeeds.
//
// opts are DeletePrefix's (nil: the defaults), with the prefix rules set
// to the whole bucket; KeepNoncurrentVersions is refused, since a bucket
// that keeps versions cannot be deleted. A URL with prefix= names part of
// a bucket and is refused. With opts.DryRun, DeleteBucket lists what would
// be deleted and deletes nothing, the bucket included.
//
// Nothing under S3 Object Lock is forced: as with DeletePrefix, a version
// under retention or a legal hold stays (governance retention goes only
// with opts.BypassGovernanceRetention), the bucket stays with it, and the
// error is DeletePrefix's *DeleteError that is ErrRetained, whose
// RetainedError.RetryAt says when a rerun can go on.
//
// file:// deletes the files, then the directories left empty, the
// bucket's own directory last (a file written meanwhile fails it). mem://
// has no bucket to delete (every mem:// OpenBucket is a bucket of its
// own). Providers: s3, gs and azblob. An object written after the
// listing fails the bucket's deletion, and stays with the bucket: on S3
// and GCS the store refuses to delete a bucket that is not empty (S3's
// BucketNotEmpty, GCS's 409: run again); Azure has no such condition (it
// deletes a container with whatever it holds, and no condition of a
// container's deletion looks at its blobs), so the container is listed
// again right before its deletion and kept when it holds a blob; one
// written between that listing and the deletion goes with it.
func DeleteBucket(ctx context.Context, rawURL string, creds *Credentials, opts *DeleteOptions) (*DeleteResult, error) {
	res := &DeleteResult{Method: "none"}
	bu, err := ParseURL(rawURL)
	if err != nil {
		return res, err
	}
	scheme := bu.ID.Scheme
	if bu.Prefix != "" {
		return res, fmt.Errorf("%w: delete bucket %s: the URL names prefix=%q, part of a bucket", ErrInvalidConfig, rawURL, bu.Prefix)
	}
	o := DeleteOptions{}
	if opts != nil {
		o = *opts
	}
	if o.KeepNoncurrentVersions {
		return res, fmt.Errorf("%w: delete bucket %s: DeleteOptions.KeepNoncurrentVersions = true: a bucket that keeps versions cannot be deleted", ErrInvalidConfig, rawURL)
	}
	o.PrefixRules = PrefixRules{AllowEmpty: true}
	switch scheme {
	case "mem":
		return res, nil
	case "file":
		return deleteDirBucket(ctx, bu, &o)
	}
	provider := driver.Lookup(scheme)
	bd, ok := provider.(driver.BucketDeleter)
	if provider != nil && !ok {
		return res, fmt.Errorf("%w: delete bucket %s: the %s provider cannot delete buckets", ErrInvalidConfig, rawURL, scheme)
	}
	b, err := openURL(ctx, bu, creds) // without a provider: the error names its import
	if err != nil {
		return res, err
	}
	defer b.Close()
	host := bu.withoutPrefix().Host
	exists, err := bd.BucketExists(ctx, b, host)
	if err != nil {
		return res, fmt.Errorf("backupstore: delete bucket %s: %w", rawURL, err)
	}
	if !exists {
		return res, nil
	}
	res, err = DeletePrefix(ctx, b, "", &o)
	if err != nil || o.DryRun {
		return res, err
	}
	if err := bd.DeleteBucket(ctx, b, host); err != nil {
		return res, fmt.Errorf("backupstore: delete bucket %s: %w", rawURL, err)
	}
	return res, nil
}

// deleteDirBucket deletes a file:// bucket: its files (DeletePrefix),
// then its directories, deepest first, each only if empty.
func deleteDirBucket(ctx context.Context, bu URL, o *DeleteOptions) (*DeleteResult, error) {
	res := &DeleteResult{Method: "none"}
	rawURL, dir := bu.String(), bu.withoutPrefix().Path
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return res, nil
	}
	b, err := openURL(ctx, bu, nil)
	if err != nil {
		return res, err
	}
	defer b.Close()
	res, err = DeletePrefix(ctx, b, "", o)
	if err != nil || o.DryRun {
		return res, err
	}
	var dirs []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return res, fmt.Errorf("backupstore: delete bucket %s: %w", rawURL, err)
	}
	slices.Reverse(dirs) // children after their parent in a walk
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("backupstore: delete bucket %s: %w", rawURL, err)
		}
	}
	return res, nil
}
