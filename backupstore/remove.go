package backupstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// removerFor picks the fastest way to delete objects from b.
func removerFor(b *blob.Bucket, opts *DeleteOptions) remover {
	var s3c *s3.Client
	if b.As(&s3c) {
		return &s3Remover{client: s3c}
	}
	var cc *container.Client
	if b.As(&cc) {
		// Single deletes go 16 at a time within each batch, so that
		// Concurrency bounds the requests in flight to 16 times it.
		r := &azureRemover{client: cc, perObject: 16}
		switch opts.AzureBatch {
		case BatchNever:
			r.fallback.Store(true)
		case BatchAuto:
			// Azurite (whose account is always devstoreaccount1) takes
			// longer for a batch of n deletes than for n deletes 16 at a
			// time.
			r.fallback.Store(strings.Contains(cc.URL(), "/"+azuriteAccount+"/"))
		}
		return r
	}
	r := &objectRemover{bucket: b}
	b.As(&r.gcs)
	return r
}

// azuriteAccount is the account of the Azure Storage emulator.
const azuriteAccount = "devstoreaccount1"

// s3Remover deletes with DeleteObjects, up to 1,000 keys a request, instead
// of gocloud's HEAD and DELETE per key.
type s3Remover struct {
	client *s3.Client
	bucket atomic.Pointer[string]
	listed atomic.Pointer[string]
	// versioned: targets name versions, deleted with their VersionId.
	versioned        bool
	bypassGovernance bool
	lockOnce         sync.Once
	lock             bool // the bucket has Object Lock enabled
}

func (r *s3Remover) method() string {
	if r.versioned {
		return "s3-versions"
	}
	return "s3-batch"
}
func (r *s3Remover) batchSize() int   { return 1000 }
func (r *s3Remover) concurrency() int { return 4 }

// prepare learns the bucket's name, which *blob.Bucket does not expose,
// and the listing's prefix as S3 sees it, from the listing request.
func (r *s3Remover) prepare(opts *blob.ListOptions) {
	opts.BeforeList = func(as func(any) bool) error {
		var v2 *s3.ListObjectsV2Input
		var v1 *s3.ListObjectsInput
		switch {
		case as(&v2):
			r.bucket.Store(v2.Bucket)
			r.listed.Store(v2.Prefix)
		case as(&v1):
			r.bucket.Store(v1.Bucket)
			r.listed.Store(v1.Prefix)
		}
		return nil
	}
}

func (r *s3Remover) listedPrefix() (string, bool) {
	p := r.listed.Load()
	return aws.ToString(p), p != nil
}

func (r *s3Remover) raw(o *blob.ListObject) (string, bool) {
	var obj s3types.Object
	if o.As(&obj) && obj.Key != nil {
		return *obj.Key, true
	}
	return "", false
}

// s3KeyError is a per-key error of a DeleteObjects response.
type s3KeyError struct{ Code, Message string }

func (e *s3KeyError) Error() string { return e.Code + ": " + e.Message }

func (r *s3Remover) remove(ctx context.Context, ts []target) []error {
	errs := make([]error, len(ts))
	bucket := r.bucket.Load()
	if bucket == nil {
		err := errors.New("s3: bucket name unknown (listing did not reveal it)")
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	// A key is deleted only when the response says so: Quiet mode lists
	// only the failures, and an error entry that names no key of the batch
	// (spelled otherwise, or no key at all) would leave a failed key
	// looking deleted.
	// On a versioned bucket an entry is matched on its key and version: a
	// Deleted entry for the key alone (a new delete marker) confirms
	// nothing.
	ids := make([]s3types.ObjectIdentifier, 0, len(ts))
	index := make(map[string][]int, len(ts))
	for i, t := range ts {
		id := t.raw + "\x00" + t.version
		if _, dup := index[id]; !dup {
			oid := s3types.ObjectIdentifier{Key: aws.String(t.raw)}
			if t.version != "" {
				oid.VersionId = aws.String(t.version)
			}
			ids = append(ids, oid)
		}
		index[id] = append(index[id], i)
	}
	in := &s3.DeleteObjectsInput{
		Bucket: bucket,
		Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(false)},
	}
	if r.bypassGovernance {
		in.BypassGovernanceRetention = aws.Bool(true)
	}
	out, err := r.client.DeleteObjects(ctx, in)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	confirmed := make([]bool, len(ts))
	for _, d := range out.Deleted {
		for _, i := range index[aws.ToString(d.Key)+"\x00"+r.versionOf(d.VersionId)] {
			confirmed[i] = true
		}
	}
	var unmatched []string
	for _, e := range out.Errors {
		is, ok := index[aws.ToString(e.Key)+"\x00"+r.versionOf(e.VersionId)]
		if !ok || e.Key == nil {
			unmatched = append(unmatched, fmt.Sprintf("%s for key %q", aws.ToString(e.Code), aws.ToString(e.Key)))
			continue
		}
		for _, i := range is {
			switch {
			case aws.ToString(e.Code) == "NoSuchKey" || aws.ToString(e.Code) == "NoSuchVersion":
				if errs[i] == nil {
					errs[i] = errGone
				}
			case errs[i] == nil || errors.Is(errs[i], errGone):
				// An error entry wins over a Deleted one for the same key.
				errs[i] = &s3KeyError{Code: aws.ToString(e.Code), Message: aws.ToString(e.Message)}
			}
		}
	}
	for i := range errs {
		if errs[i] == nil && !confirmed[i] {
			msg := "the DeleteObjects response does not confirm this key's deletion"
			if len(unmatched) > 0 {
				msg += "; it has error entries naming no key of the request: " + strings.Join(unmatched, ", ")
			}
			errs[i] = &s3KeyError{Code: s3Unconfirmed, Message: msg}
		}
	}
	if r.versioned {
		r.retention(ctx, ts, errs)
	}
	return errs
}

// versionOf is the version ID of a DeleteObjects response entry as it is
// matched with the request: none for an unversioned deletion, whatever
// version the store names (the new delete marker's, or "null").
func (r *s3Remover) versionOf(v *string) string {
	if !r.versioned {
		return ""
	}
	return aws.ToString(v)
}

// s3Unconfirmed is the code of a key that a DeleteObjects response neither
// confirms deleted nor names in an error entry.
const s3Unconfirmed = "Unconfirmed"

// azureRemover deletes with Blob Batch, up to 256 blobs a request. Where the
// service does not support batches (Azurite), it falls back to one request
// per blob, perObject at a time, for the rest of the run.
type azureRemover struct {
	client    *container.Client
	perObject int
	fallback  atomic.Bool
	listed    atomic.Pointer[string]
}

func (r *azureRemover) method() string {
	if r.fallback.Load() {
		return "per-object"
	}
	return "azure-batch"
}
func (r *azureRemover) batchSize() int   { return 256 }
func (r *azureRemover) concurrency() int { return 4 }

// prepare learns the listing's prefix as Azure sees it from the request.
func (r *azureRemover) prepare(opts *blob.ListOptions) {
	opts.BeforeList = func(as func(any) bool) error {
		var o *container.ListBlobsHierarchyOptions
		if as(&o) && o != nil {
			r.listed.Store(o.Prefix)
		}
		return nil
	}
}

func (r *azureRemover) listedPrefix() (string, bool) {
	p := r.listed.Load()
	if p == nil {
		return "", false
	}
	return *p, true
}
func (r *azureRemover) raw(o *blob.ListObject) (string, bool) {
	var item container.BlobItem
	if o.As(&item) && item.Name != nil {
		return *item.Name, true
	}
	return "", false
}

func (r *azureRemover) remove(ctx context.Context, ts []target) []error {
	if r.fallback.Load() {
		return r.removeEach(ctx, ts)
	}
	errs := make([]error, len(ts))
	bb, err := r.client.NewBatchBuilder()
	if err == nil {
		for _, t := range ts {
			if err = bb.Delete(t.raw, nil); err != nil {
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
				errs[i] = errGone
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

func (r *azureRemover) removeEach(ctx context.Context, ts []target) []error {
	return forEach(ctx, len(ts), r.perObject, func(i int) error {
		_, err := r.client.NewBlobClient(ts[i].raw).Delete(ctx, nil)
		if bloberror.HasCode(err, bloberror.BlobNotFound) {
			return errGone
		}
		return err
	})
}

// objectRemover deletes one object per request through gocloud, and on a
// GCS bucket with object versioning one generation per request through
// the GCS client.
type objectRemover struct {
	bucket *blob.Bucket
	listed atomic.Pointer[string]
	// gcs is the client of a GCS bucket, gcsBucket its name; versioned:
	// targets name generations.
	gcs       *storage.Client
	gcsBucket string
	versioned bool
}

func (r *objectRemover) method() string {
	if r.versioned {
		return "per-version"
	}
	return "per-object"
}
func (r *objectRemover) batchSize() int   { return 1 }
func (r *objectRemover) concurrency() int { return 16 }

// raw returns the GCS object name, checked (not used) before the delete.
func (r *objectRemover) raw(o *blob.ListObject) (string, bool) {
	var attrs storage.ObjectAttrs
	if o.As(&attrs) {
		return attrs.Name, true
	}
	return "", false
}

// prepare learns the listing's prefix as GCS sees it from the request;
// fileblob and memblob do not tell it.
func (r *objectRemover) prepare(opts *blob.ListOptions) {
	opts.BeforeList = func(as func(any) bool) error {
		var q *storage.Query
		if as(&q) && q != nil {
			p := q.Prefix
			r.listed.Store(&p)
		}
		return nil
	}
}

func (r *objectRemover) listedPrefix() (string, bool) {
	p := r.listed.Load()
	if p == nil {
		return "", false
	}
	return *p, true
}
func (r *objectRemover) remove(ctx context.Context, ts []target) []error {
	errs := make([]error, len(ts))
	for i, t := range ts {
		var err error
		if t.version != "" {
			err = r.deleteGeneration(ctx, t)
		} else {
			err = r.bucket.Delete(ctx, t.key)
		}
		if notFound(err) || errors.Is(err, storage.ErrObjectNotExist) {
			err = errGone
		}
		errs[i] = err
	}
	return errs
}

func (r *objectRemover) deleteGeneration(ctx context.Context, t target) error {
	gen, err := strconv.ParseInt(t.version, 10, 64)
	if err != nil {
		return fmt.Errorf("gcs: generation %q: not a number", t.version)
	}
	return r.gcs.Bucket(r.gcsBucket).Object(t.raw).Generation(gen).Delete(ctx)
}

// forEach calls f(0..n-1) with at most limit calls at once and returns the
// errors by index.
func forEach(ctx context.Context, n, limit int, f func(int) error) []error {
	errs := make([]error, n)
	sem := make(chan struct{}, max(limit, 1))
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			for j := i; j < n; j++ {
				errs[j] = ctx.Err()
			}
			wg.Wait()
			return errs
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errs
}

// transient reports whether err may go away if the request is repeated.
// Errors of the context are not transient: the caller gave up.
func transient(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, errOutsidePrefix) || errors.Is(err, ErrRetained) {
		return false
	}
	var ke *s3KeyError
	if errors.As(err, &ke) {
		switch ke.Code {
		case "InternalError", "SlowDown", "ServiceUnavailable", "RequestTimeout", "OperationAborted":
			return true
		}
		return false
	}
	if status, ok := httpStatus(err); ok {
		return status >= 500 || status == 408 || status == 429
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound, gcerrors.InvalidArgument, gcerrors.PermissionDenied, gcerrors.FailedPrecondition,
		gcerrors.Unimplemented, gcerrors.AlreadyExists, gcerrors.Canceled:
		return false
	}
	// Unknown errors are retried: deletes are idempotent, and tries are
	// bounded.
	return true
}

// httpStatus digs the HTTP status out of the providers' error types.
func httpStatus(err error) (int, bool) {
	var se *smithyhttp.ResponseError
	if errors.As(err, &se) && se.Response != nil {
		return se.Response.StatusCode, true
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode, true
	}
	type coder interface{ HTTPStatusCode() int }
	var c coder
	if errors.As(err, &c) {
		return c.HTTPStatusCode(), true
	}
	return 0, false
}
