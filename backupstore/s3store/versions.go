package s3store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithy "github.com/aws/smithy-go"
	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

// errProbed stops gocloud before it makes a request: only the request's
// input, which names the bucket and the key as the store spells it, is
// wanted.
var errProbed = errors.New("probed")

// listPageSize is the most versions a ListObjectVersions page holds.
const listPageSize = 1000

// ProbeVersioning: see driver.VersionLister. A bucket whose versioning is
// Suspended still holds versions: it counts as versioned.
func (r *remover) ProbeVersioning(ctx context.Context, run driver.Run) (bool, error) {
	if err := r.learn(ctx, run); err != nil {
		return false, err
	}
	bucket := r.bucket.Load()
	var out *s3.GetBucketVersioningOutput
	err := run.Retry(ctx, func() error {
		var err error
		out, err = r.client.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: bucket})
		return err
	})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NotImplemented" {
		// A store without versioning (some S3-compatible ones).
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("s3: GetBucketVersioning of bucket %q (needs s3:GetBucketVersioning; set KeepNoncurrentVersions to delete only current versions without asking): %w", *bucket, err)
	}
	r.versioned = out.Status != ""
	return r.versioned, nil
}

// learn learns the bucket's name and the prefix S3 lists for run's prefix
// from gocloud, without a request, and checks that prefix.
func (r *remover) learn(ctx context.Context, run driver.Run) error {
	const probe = "versioning-probe"
	_, _ = run.Bucket().SignedURL(ctx, run.Prefix()+probe, &blob.SignedURLOptions{
		BeforeSign: func(as func(any) bool) error {
			var in *s3.GetObjectInput
			if as(&in) && in != nil && strings.HasSuffix(aws.ToString(in.Key), probe) {
				r.bucket.Store(in.Bucket)
				p := strings.TrimSuffix(aws.ToString(in.Key), probe)
				r.Listed.Store(&p)
			}
			return errProbed
		},
	})
	if r.bucket.Load() == nil {
		return errors.New("s3: the bucket's name is unknown (gocloud did not reveal it)")
	}
	return run.CheckEffectivePrefix()
}

// versionMarker is where a ListObjectVersions page starts.
type versionMarker struct{ key, version *string }

func (r *remover) VersionsPage(ctx context.Context, listed string, token any) ([]driver.Target, any, error) {
	in := &s3.ListObjectVersionsInput{Bucket: r.bucket.Load(), Prefix: aws.String(listed), MaxKeys: aws.Int32(listPageSize)}
	if m, ok := token.(versionMarker); ok {
		in.KeyMarker, in.VersionIdMarker = m.key, m.version
	}
	out, err := r.client.ListObjectVersions(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	ts := make([]driver.Target, 0, len(out.Versions)+len(out.DeleteMarkers))
	for _, v := range out.Versions {
		ts = append(ts, driver.Target{Raw: aws.ToString(v.Key), Version: aws.ToString(v.VersionId), Size: aws.ToInt64(v.Size), Latest: aws.ToBool(v.IsLatest)})
	}
	for _, m := range out.DeleteMarkers {
		ts = append(ts, driver.Target{Raw: aws.ToString(m.Key), Version: aws.ToString(m.VersionId), Marker: true, Latest: aws.ToBool(m.IsLatest)})
	}
	if !aws.ToBool(out.IsTruncated) {
		return ts, nil, nil
	}
	if out.NextKeyMarker == nil && out.NextVersionIdMarker == nil {
		return nil, nil, errors.New("a truncated page without a marker to continue from")
	}
	return ts, versionMarker{out.NextKeyMarker, out.NextVersionIdMarker}, nil
}

// lockCodes are the codes of a DeleteObjects error entry for a version the
// store keeps under Object Lock: AWS says AccessDenied, MinIO
// InvalidRequest ("Object is WORM protected").
var lockCodes = []string{"AccessDenied", "InvalidRequest"}

// retention looks up the Object Lock of the versions whose deletion was
// refused with one of lockCodes (one HeadObject each, 16 at a time), on
// buckets with Object Lock enabled (one GetObjectLockConfiguration per
// call, the first time a deletion is refused), and replaces their errors
// with a *backupstore.Retention where a lock is on.
func (r *remover) retention(ctx context.Context, ts []driver.Target, errs []error) {
	var idx []int
	for i, err := range errs {
		var ke *keyError
		if ts[i].Version != "" && !ts[i].Marker && errors.As(err, &ke) && slices.Contains(lockCodes, ke.Code) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 || !r.lockEnabled(ctx) {
		return
	}
	bucket := r.bucket.Load()
	driver.ForEach(ctx, len(idx), 16, func(j int) error {
		i := idx[j]
		out, err := r.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String(ts[i].Raw), VersionId: aws.String(ts[i].Version)})
		if err != nil {
			// The refusal stays the error; the lookup's failure is noted.
			errs[i] = fmt.Errorf("%w (looking up its object lock: %v)", errs[i], err)
			return nil
		}
		if ret := retentionOf(out, time.Time{}, false); ret != nil {
			errs[i] = ret
		}
		return nil
	})
}

// Retention: see driver.RetentionLister. On a bucket with Object Lock
// enabled it makes one GetObjectLockConfiguration, then one HeadObject a
// version (16 at a time).
func (r *remover) Retention(ctx context.Context, ts []driver.Target, now time.Time, bypass bool) ([]error, error) {
	out := make([]error, len(ts))
	if !r.lockEnabled(ctx) {
		return out, nil
	}
	bucket := r.bucket.Load()
	return out, errors.Join(driver.ForEach(ctx, len(ts), 16, func(i int) error {
		t := ts[i]
		if t.Marker || t.Version == "" {
			return nil
		}
		head, err := r.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String(t.Raw), VersionId: aws.String(t.Version)})
		if err != nil {
			return fmt.Errorf("look up the object lock of %s (version %s): %w", t.Key, t.Version, err)
		}
		if ret := retentionOf(head, now, bypass); ret != nil {
			out[i] = ret
		}
		return nil
	})...)
}

// retentionOf is the lock a HeadObject answer shows that keeps the version
// from being deleted at now (zero: whenever), or nil: a retention period
// not over (governance not counted when bypass is set), or a legal hold.
func retentionOf(out *s3.HeadObjectOutput, now time.Time, bypass bool) *backupstore.Retention {
	ret := &backupstore.Retention{LegalHold: out.ObjectLockLegalHoldStatus == s3types.ObjectLockLegalHoldStatusOn}
	if until := out.ObjectLockRetainUntilDate; until != nil && out.ObjectLockMode != "" && until.After(now) &&
		!(bypass && out.ObjectLockMode == s3types.ObjectLockModeGovernance) {
		ret.Mode, ret.RetainUntil = string(out.ObjectLockMode), until.UTC()
	}
	if !ret.LegalHold && ret.RetainUntil.IsZero() {
		return nil
	}
	return ret
}

// lockEnabled reports whether the bucket has Object Lock enabled, asking
// S3 the first time only.
func (r *remover) lockEnabled(ctx context.Context) bool {
	r.lockOnce.Do(func() {
		out, err := r.client.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: r.bucket.Load()})
		// A bucket without Object Lock answers an error
		// (ObjectLockConfigurationNotFoundError); any other error leaves
		// the refusals as they are.
		r.lock = err == nil && out.ObjectLockConfiguration != nil &&
			out.ObjectLockConfiguration.ObjectLockEnabled == s3types.ObjectLockEnabledEnabled
	})
	return r.lock
}
