package gcsstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob"
	"google.golang.org/api/iterator"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

// remover deletes one object per request through gocloud, and on a bucket
// with object versioning one generation per request through the GCS
// client.
type remover struct {
	bucket *blob.Bucket
	client *storage.Client
	driver.Listed
	// name is the bucket's name, learnt by ProbeVersioning; versioned:
	// targets name generations.
	name      string
	versioned bool
}

var (
	_ driver.Remover       = (*remover)(nil)
	_ driver.VersionLister = (*remover)(nil)
)

// errProbed stops gocloud before it makes a request: only the request's
// object handle, which names the bucket and the object, is wanted.
var errProbed = errors.New("probed")

// listPageSize is the most generations a listing page holds.
const listPageSize = 1000

func (r *remover) Method() string {
	if r.versioned {
		return "per-version"
	}
	return "per-object"
}
func (r *remover) BatchSize() int   { return 1 }
func (r *remover) Concurrency() int { return 16 }

// Raw returns the GCS object name, checked (not used) before the delete.
func (r *remover) Raw(o *blob.ListObject) (string, bool) {
	var attrs storage.ObjectAttrs
	if o.As(&attrs) {
		return attrs.Name, true
	}
	return "", false
}

// Prepare learns the listing's prefix as GCS sees it from the request.
func (r *remover) Prepare(opts *blob.ListOptions) {
	opts.BeforeList = func(as func(any) bool) error {
		var q *storage.Query
		if as(&q) && q != nil {
			p := q.Prefix
			r.Listed.Store(&p)
		}
		return nil
	}
}

func (r *remover) Remove(ctx context.Context, ts []driver.Target) []error {
	errs := make([]error, len(ts))
	for i, t := range ts {
		var err error
		if t.Version != "" {
			err = r.deleteGeneration(ctx, t)
		} else {
			err = r.bucket.Delete(ctx, t.Key)
		}
		if driver.IsNotFound(err) || errors.Is(err, storage.ErrObjectNotExist) {
			err = driver.ErrGone
		}
		errs[i] = err
	}
	return errs
}

func (r *remover) deleteGeneration(ctx context.Context, t driver.Target) error {
	gen, err := strconv.ParseInt(t.Version, 10, 64)
	if err != nil {
		return fmt.Errorf("gcs: generation %q: not a number", t.Version)
	}
	return r.client.Bucket(r.name).Object(t.Raw).Generation(gen).Delete(ctx)
}

// ProbeVersioning: see driver.VersionLister. A bucket counts as versioned
// while its object versioning is enabled.
func (r *remover) ProbeVersioning(ctx context.Context, run driver.Run) (bool, error) {
	const probe = "versioning-probe"
	rd, err := run.Bucket().NewReader(ctx, run.Prefix()+probe, &blob.ReaderOptions{
		BeforeRead: func(as func(any) bool) error {
			var oh **storage.ObjectHandle
			if as(&oh) && oh != nil && *oh != nil && strings.HasSuffix((*oh).ObjectName(), probe) {
				r.name = (*oh).BucketName()
				p := strings.TrimSuffix((*oh).ObjectName(), probe)
				r.Listed.Store(&p)
			}
			return errProbed
		},
	})
	if err == nil {
		rd.Close()
	}
	if r.name == "" {
		return false, errors.New("gcs: the bucket's name is unknown (gocloud did not reveal it)")
	}
	if err := run.CheckEffectivePrefix(); err != nil {
		return false, err
	}
	var attrs *storage.BucketAttrs
	err = run.Retry(ctx, func() error {
		var err error
		attrs, err = r.client.Bucket(r.name).Attrs(ctx)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("gcs: attributes of bucket %q (needs storage.buckets.get; set KeepNoncurrentVersions to delete only live objects without asking): %w", r.name, err)
	}
	r.versioned = attrs.VersioningEnabled
	return r.versioned, nil
}

func (r *remover) VersionsPage(ctx context.Context, listed string, token any) ([]driver.Target, any, error) {
	it := r.client.Bucket(r.name).Objects(ctx, &storage.Query{Prefix: listed, Versions: true})
	tok, _ := token.(string)
	var attrs []*storage.ObjectAttrs
	next, err := iterator.NewPager(it, listPageSize, tok).NextPage(&attrs)
	if err != nil {
		return nil, nil, err
	}
	ts := make([]driver.Target, 0, len(attrs))
	for _, a := range attrs {
		// A noncurrent generation has the time it stopped being live.
		ts = append(ts, driver.Target{Raw: a.Name, Version: strconv.FormatInt(a.Generation, 10), Size: a.Size, Latest: a.Deleted.IsZero()})
	}
	if next == "" {
		return ts, nil, nil
	}
	return ts, next, nil
}
