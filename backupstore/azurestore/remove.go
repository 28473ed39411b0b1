package azurestore

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

// remover deletes with Blob Batch, up to 256 blobs a request. Where the
// service does not support batches (Azurite), it falls back to one request
// per blob, perObject at a time, for the rest of the run.
type remover struct {
	client    *container.Client
	perObject int
	fallback  atomic.Bool
	driver.Listed
}

var _ driver.Remover = (*remover)(nil)

func (r *remover) Method() string {
	if r.fallback.Load() {
		return "per-object"
	}
	return "azure-batch"
}
func (r *remover) BatchSize() int   { return 256 }
func (r *remover) Concurrency() int { return 4 }

// Prepare learns the listing's prefix as Azure sees it from the request.
func (r *remover) Prepare(opts *blob.ListOptions) {
	opts.BeforeList = func(as func(any) bool) error {
		var o *container.ListBlobsHierarchyOptions
		if as(&o) && o != nil {
			r.Listed.Store(o.Prefix)
		}
		return nil
	}
}

func (r *remover) Raw(o *blob.ListObject) (string, bool) {
	var item container.BlobItem
	if o.As(&item) && item.Name != nil {
		return *item.Name, true
	}
	return "", false
}

func (r *remover) Remove(ctx context.Context, ts []driver.Target) []error {
	if r.fallback.Load() {
		return r.removeEach(ctx, ts)
	}
	errs := make([]error, len(ts))
	bb, err := r.client.NewBatchBuilder()
	if err == nil {
		for _, t := range ts {
			if err = bb.Delete(t.Raw, nil); err != nil {
				break
			}
		}
	}
	if err != nil {
		r.fallback.Store(true)
		return r.removeEach(ctx, ts)
	}
	resp, err := r.client.SubmitBatch(ctx, bb, nil)
	if err != nil {
		var re *azcore.ResponseError
		if errors.As(err, &re) && re.StatusCode >= 400 && re.StatusCode < 500 && re.StatusCode != 408 && re.StatusCode != 429 {
			// The batch request itself was refused: the service has no
			// batch API (Azurite answers 400).
			r.fallback.Store(true)
			return r.removeEach(ctx, ts)
		}
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	seen := make([]bool, len(ts))
	for _, item := range resp.Responses {
		if item.ContentID == nil || *item.ContentID < 0 || *item.ContentID >= len(ts) {
			continue
		}
		i := *item.ContentID
		seen[i] = true
		if item.Error != nil {
			if bloberror.HasCode(item.Error, bloberror.BlobNotFound) {
				errs[i] = driver.ErrGone
			} else {
				errs[i] = item.Error
			}
		}
	}
	for i, ok := range seen {
		if !ok {
			errs[i] = errors.New("azure: batch response has no entry for this blob")
		}
	}
	return errs
}

func (r *remover) removeEach(ctx context.Context, ts []driver.Target) []error {
	return driver.ForEach(ctx, len(ts), r.perObject, func(i int) error {
		_, err := r.client.NewBlobClient(ts[i].Raw).Delete(ctx, nil)
		if bloberror.HasCode(err, bloberror.BlobNotFound) {
			return driver.ErrGone
		}
		return err
	})
}
