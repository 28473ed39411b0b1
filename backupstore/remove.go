package backupstore

import (
	"context"

	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

// removerFor picks the fastest way to delete objects from b: its
// provider's, or one request per object through gocloud for the stores
// no provider owns (fileblob, memblob). It refuses a bucket that storeOf
// refuses.
func removerFor(b *blob.Bucket, opts *DeleteOptions) (driver.Remover, error) {
	p, err := storeOf(b)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return &objectRemover{bucket: b}, nil
	}
	var ro driver.RemoverOptions
	switch opts.AzureBatch {
	case BatchAlways:
		ro.AzureBatch = driver.BatchAlways
	case BatchNever:
		ro.AzureBatch = driver.BatchNever
	}
	if !opts.KeepNoncurrentVersions {
		// Versions are deleted only then; the bypass applies to them.
		ro.BypassGovernance = opts.BypassGovernanceRetention
	}
	return p.Remover(b, ro), nil
}

// objectRemover deletes one object per request through gocloud.
type objectRemover struct{ bucket *blob.Bucket }

func (r *objectRemover) Method() string                      { return "per-object" }
func (r *objectRemover) BatchSize() int                      { return 1 }
func (r *objectRemover) Concurrency() int                    { return 16 }
func (r *objectRemover) Prepare(*blob.ListOptions)           {}
func (r *objectRemover) Raw(*blob.ListObject) (string, bool) { return "", false }

// ListedPrefix: fileblob and memblob do not tell it.
func (r *objectRemover) ListedPrefix() (string, bool) { return "", false }

func (r *objectRemover) Remove(ctx context.Context, ts []driver.Target) []error {
	errs := make([]error, len(ts))
	for i, t := range ts {
		err := r.bucket.Delete(ctx, t.Key)
		if notFound(err) {
			err = driver.ErrGone
		}
		errs[i] = err
	}
	return errs
}

// transient reports whether err may go away if the request is repeated
// (driver.IsTransient: the providers judge their SDKs' errors).
func transient(ctx context.Context, err error) bool { return driver.IsTransient(ctx, err) }

// notFound reports whether err says that an object (or its bucket) does not
// exist (driver.IsNotFound: gocloud's code, S3's own where s3store is
// linked).
func notFound(err error) bool { return driver.IsNotFound(err) }
