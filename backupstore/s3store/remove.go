package s3store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

// remover deletes with DeleteObjects, up to 1,000 keys a request, instead
// of gocloud's HEAD and DELETE per key.
type remover struct {
	client *s3.Client
	bucket atomic.Pointer[string]
	driver.Listed
	// versioned: targets name versions, deleted with their VersionId.
	versioned        bool
	bypassGovernance bool
	lockOnce         sync.Once
	lock             bool // the bucket has Object Lock enabled
}

// ListsEveryMD5: S3 has an MD5 of an object only as the ETag of an object
// written in one request, and the listing gives every ETag.
func (r *remover) ListsEveryMD5() {}

// ReadMetadata reads the metadata of an object from the response of its
// GetObject.
func (r *remover) ReadMetadata(rd *blob.Reader) (map[string]string, bool) {
	var out s3.GetObjectOutput
	if !rd.As(&out) {
		return nil, false
	}
	return out.Metadata, true
}

var (
	_ driver.MetadataReader  = (*remover)(nil)
	_ driver.MD5Lister       = (*remover)(nil)
	_ driver.Remover         = (*remover)(nil)
	_ driver.VersionLister   = (*remover)(nil)
	_ driver.RetentionLister = (*remover)(nil)
	_ driver.Expirer         = (*remover)(nil)
)

func (r *remover) Method() string {
	if r.versioned {
		return "s3-versions"
	}
	return "s3-batch"
}
func (r *remover) BatchSize() int   { return 1000 }
func (r *remover) Concurrency() int { return 4 }

// Prepare learns the bucket's name, which *blob.Bucket does not expose,
// and the listing's prefix as S3 sees it, from the listing request.
func (r *remover) Prepare(opts *blob.ListOptions) {
	opts.BeforeList = func(as func(any) bool) error {
		var v2 *s3.ListObjectsV2Input
		var v1 *s3.ListObjectsInput
		switch {
		case as(&v2):
			r.bucket.Store(v2.Bucket)
			r.Listed.Store(v2.Prefix)
		case as(&v1):
			r.bucket.Store(v1.Bucket)
			r.Listed.Store(v1.Prefix)
		}
		return nil
	}
}

func (r *remover) Raw(o *blob.ListObject) (string, bool) {
	var obj s3types.Object
	if o.As(&obj) && obj.Key != nil {
		return *obj.Key, true
	}
	return "", false
}

// keyError is a per-key error of a DeleteObjects response.
type keyError struct{ Code, Message string }

func (e *keyError) Error() string { return e.Code + ": " + e.Message }

func (r *remover) Remove(ctx context.Context, ts []driver.Target) []error {
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
	ids, index := identifiers(ts)
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
	r.match(out, index, errs)
	if r.versioned {
		r.retention(ctx, ts, errs)
	}
	return errs
}

// identifiers returns the objects of a DeleteObjects request for ts, each
// once, and the indexes in ts of each key and version.
func identifiers(ts []driver.Target) ([]s3types.ObjectIdentifier, map[string][]int) {
	ids := make([]s3types.ObjectIdentifier, 0, len(ts))
	index := make(map[string][]int, len(ts))
	for i, t := range ts {
		id := t.Raw + "\x00" + t.Version
		if _, dup := index[id]; !dup {
			oid := s3types.ObjectIdentifier{Key: aws.String(t.Raw)}
			if t.Version != "" {
				oid.VersionId = aws.String(t.Version)
			}
			ids = append(ids, oid)
		}
		index[id] = append(index[id], i)
	}
	return ids, index
}

// match sets errs from a DeleteObjects response: a key is deleted only when
// a Deleted entry names it and its version; an error entry wins over a
// Deleted one; a key the response does not confirm fails.
func (r *remover) match(out *s3.DeleteObjectsOutput, index map[string][]int, errs []error) {
	confirmed := make([]bool, len(errs))
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
					errs[i] = driver.ErrGone
				}
			case errs[i] == nil || errors.Is(errs[i], driver.ErrGone):
				// An error entry wins over a Deleted one for the same key.
				errs[i] = &keyError{Code: aws.ToString(e.Code), Message: aws.ToString(e.Message)}
			}
		}
	}
	for i := range errs {
		if errs[i] == nil && !confirmed[i] {
			msg := "the DeleteObjects response does not confirm this key's deletion"
			if len(unmatched) > 0 {
				msg += "; it has error entries naming no key of the request: " + strings.Join(unmatched, ", ")
			}
			errs[i] = &keyError{Code: unconfirmed, Message: msg}
		}
	}
}

// versionOf is the version ID of a DeleteObjects response entry as it is
// matched with the request: none for an unversioned deletion, whatever
// version the store names (the new delete marker's, or "null").
func (r *remover) versionOf(v *string) string {
	if !r.versioned {
		return ""
	}
	return aws.ToString(v)
}

// unconfirmed is the code of a key that a DeleteObjects response neither
// confirms deleted nor names in an error entry.
const unconfirmed = "Unconfirmed"
