package backupstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithy "github.com/aws/smithy-go"
	"gocloud.dev/blob"
	"google.golang.org/api/iterator"

	"github.com/groundskeeper-io/groundskeeper/internal/storeerr"
)

// ObjectVersion is one version or delete marker of an object on a
// versioned bucket, as a dry run lists it.
type ObjectVersion struct {
	Key       string
	VersionID string
	// DeleteMarker: the version is a delete marker (no data, Size 0).
	DeleteMarker bool
	// Latest: the version is the current one of its key.
	Latest bool
	Size   int64
	// Retention, in a dry run on a bucket with S3 Object Lock enabled, is
	// the lock that would keep the version from being deleted now (a
	// retention period not over yet and not bypassed, or a legal hold);
	// nil when it would be deleted.
	Retention *Retention
}

// ErrRetained is matched (errors.Is) by the error of a DeletePrefix that
// left object versions because the store keeps them under S3 Object Lock:
// a retention period (governance or compliance mode) or a legal hold.
// errors.As gives the *RetainedError, which says which and until when.
var ErrRetained = storeerr.ErrRetained

// Retention is why the store refused to delete one object version: the
// per-key error of a *DeleteError (KeyError.Err) for such a version. It is
// ErrRetained.
type Retention struct {
	// Mode is the retention mode, "GOVERNANCE" or "COMPLIANCE", or empty
	// when the version has no retention period (only a legal hold).
	Mode string
	// RetainUntil is the end of the retention period; zero without one.
	RetainUntil time.Time
	// LegalHold is set while a legal hold is on: it has no end, and only
	// someone who may remove it (s3:PutObjectLegalHold) can.
	LegalHold bool
}

func (r *Retention) Error() string {
	var parts []string
	if !r.RetainUntil.IsZero() {
		parts = append(parts, fmt.Sprintf("retained until %s by object lock (%s mode)", r.RetainUntil.UTC().Format(time.RFC3339), strings.ToLower(r.Mode)))
	}
	if r.LegalHold {
		parts = append(parts, "under a legal hold")
	}
	if len(parts) == 0 {
		return "retained by object lock"
	}
	return strings.Join(parts, " and ")
}

// Is makes every *Retention ErrRetained.
func (r *Retention) Is(target error) bool { return target == ErrRetained }

// RetainedObject is one object version DeletePrefix left because of its
// Object Lock.
type RetainedObject struct {
	Key, VersionID string
	Retention
}

// RetainedError lists the object versions that DeletePrefix did not delete
// because the store keeps them under Object Lock, and says when a rerun can
// make progress. It is ErrRetained, and is reached with errors.As from the
// *DeleteError that DeletePrefix returns (which is also ErrIncomplete).
//
// A controller keeps the owning resource, sets a condition from Error()
// ("retained until 2027-01-01T00:00:00Z by object lock") and requeues at
// RetryAt instead of retrying in a loop.
type RetainedError struct {
	Prefix  string
	Objects []RetainedObject
	// RetryAt is the earliest time a rerun could delete more: the earliest
	// RetainUntil among the retained versions not under a legal hold. It
	// is zero when every retained version is under a legal hold, which no
	// amount of waiting lifts.
	RetryAt time.Time
}

func (e *RetainedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "backupstore: delete prefix %q: %d object versions retained by object lock", e.Prefix, len(e.Objects))
	if e.RetryAt.IsZero() {
		b.WriteString(", all under a legal hold")
	} else {
		fmt.Fprintf(&b, ", the first until %s", e.RetryAt.UTC().Format(time.RFC3339))
	}
	for i, o := range e.Objects {
		if i == 3 {
			fmt.Fprintf(&b, ", and %d more", len(e.Objects)-3)
			break
		}
		fmt.Fprintf(&b, "; %s: %s", o.Key, o.Retention.Error())
	}
	return b.String()
}

// Unwrap returns ErrRetained.
func (e *RetainedError) Unwrap() error { return ErrRetained }

// Retained returns the versions among Failed that the store keeps under
// Object Lock, or nil when there are none.
func (e *DeleteError) Retained() *RetainedError {
	var re *RetainedError
	for _, f := range e.Failed {
		var r *Retention
		if !errors.As(f.Err, &r) {
			continue
		}
		if re == nil {
			re = &RetainedError{Prefix: e.Prefix}
		}
		re.Objects = append(re.Objects, RetainedObject{Key: f.Key, VersionID: f.VersionID, Retention: *r})
		if !r.LegalHold && !r.RetainUntil.IsZero() && (re.RetryAt.IsZero() || r.RetainUntil.Before(re.RetryAt)) {
			re.RetryAt = r.RetainUntil
		}
	}
	return re
}

// errProbed stops gocloud before it makes a request: only the request's
// input, which names the bucket and the key as the store spells it, is
// wanted.
var errProbed = errors.New("probed")

// versionLister is a remover that can list and delete the versions of
// objects (S3 versions and delete markers, GCS generations).
type versionLister interface {
	// probeVersioning learns the bucket's name and the prefix the store
	// lists (with the prefix of a blob.PrefixedBucket) without a request,
	// so that d.checkEffectivePrefix can check it, and asks the store once
	// whether the bucket keeps versions. When it does, the remover deletes
	// versions from then on.
	probeVersioning(ctx context.Context, d *deletion) (bool, error)
	// versionsPage lists one page of versions under listed, the prefix in
	// the store's spelling, from token (nil: the first page). Targets have
	// raw, size, version, marker and latest set. next is nil after the
	// last page.
	versionsPage(ctx context.Context, listed string, token any) (ts []target, next any, err error)
}

// probeVersioning: see versionLister. A bucket whose versioning is
// Suspended still holds versions: it counts as versioned.
func (r *s3Remover) probeVersioning(ctx context.Context, d *deletion) (bool, error) {
	if err := r.learn(ctx, d); err != nil {
		return false, err
	}
	bucket := r.bucket.Load()
	var out *s3.GetBucketVersioningOutput
	err := d.retry.do(ctx, d.clock, transient, func() error {
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
	r.bypassGovernance = d.opts.BypassGovernanceRetention
	return r.versioned, nil
}

// learn learns the bucket's name and the prefix S3 lists for d.prefix
// from gocloud, without a request, and checks that prefix.
func (r *s3Remover) learn(ctx context.Context, d *deletion) error {
	const probe = "versioning-probe"
	_, _ = d.bucket.SignedURL(ctx, d.prefix+probe, &blob.SignedURLOptions{
		BeforeSign: func(as func(any) bool) error {
			var in *s3.GetObjectInput
			if as(&in) && in != nil && strings.HasSuffix(aws.ToString(in.Key), probe) {
				r.bucket.Store(in.Bucket)
				p := strings.TrimSuffix(aws.ToString(in.Key), probe)
				r.listed.Store(&p)
			}
			return errProbed
		},
	})
	if r.bucket.Load() == nil {
		return errors.New("s3: the bucket's name is unknown (gocloud did not reveal it)")
	}
	return d.checkEffectivePrefix()
}

// s3VersionMarker is where a ListObjectVersions page starts.
type s3VersionMarker struct{ key, version *string }

func (r *s3Remover) versionsPage(ctx context.Context, listed string, token any) ([]target, any, error) {
	in := &s3.ListObjectVersionsInput{Bucket: r.bucket.Load(), Prefix: aws.String(listed), MaxKeys: aws.Int32(listPageSize)}
	if m, ok := token.(s3VersionMarker); ok {
		in.KeyMarker, in.VersionIdMarker = m.key, m.version
	}
	out, err := r.client.ListObjectVersions(ctx, in)
	if err != nil {
		return nil, nil, err
	}
	ts := make([]target, 0, len(out.Versions)+len(out.DeleteMarkers))
	for _, v := range out.Versions {
		ts = append(ts, target{raw: aws.ToString(v.Key), version: aws.ToString(v.VersionId), size: aws.ToInt64(v.Size), latest: aws.ToBool(v.IsLatest)})
	}
	for _, m := range out.DeleteMarkers {
		ts = append(ts, target{raw: aws.ToString(m.Key), version: aws.ToString(m.VersionId), marker: true, latest: aws.ToBool(m.IsLatest)})
	}
	if !aws.ToBool(out.IsTruncated) {
		return ts, nil, nil
	}
	if out.NextKeyMarker == nil && out.NextVersionIdMarker == nil {
		return nil, nil, errors.New("a truncated page without a marker to continue from")
	}
	return ts, s3VersionMarker{out.NextKeyMarker, out.NextVersionIdMarker}, nil
}

// probeVersioning: see versionLister. Only GCS buckets have versions
// here: on fileblob and memblob it makes no request and says no. A GCS
// bucket counts as versioned while its object versioning is enabled.
func (r *objectRemover) probeVersioning(ctx context.Context, d *deletion) (bool, error) {
	if r.gcs == nil {
		return false, nil
	}
	const probe = "versioning-probe"
	rd, err := d.bucket.NewReader(ctx, d.prefix+probe, &blob.ReaderOptions{
		BeforeRead: func(as func(any) bool) error {
			var oh **storage.ObjectHandle
			if as(&oh) && oh != nil && *oh != nil && strings.HasSuffix((*oh).ObjectName(), probe) {
				r.gcsBucket = (*oh).BucketName()
				p := strings.TrimSuffix((*oh).ObjectName(), probe)
				r.listed.Store(&p)
			}
			return errProbed
		},
	})
	if err == nil {
		rd.Close()
	}
	if r.gcsBucket == "" {
		return false, errors.New("gcs: the bucket's name is unknown (gocloud did not reveal it)")
	}
	if err := d.checkEffectivePrefix(); err != nil {
		return false, err
	}
	var attrs *storage.BucketAttrs
	err = d.retry.do(ctx, d.clock, transient, func() error {
		var err error
		attrs, err = r.gcs.Bucket(r.gcsBucket).Attrs(ctx)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("gcs: attributes of bucket %q (needs storage.buckets.get; set KeepNoncurrentVersions to delete only live objects without asking): %w", r.gcsBucket, err)
	}
	r.versioned = attrs.VersioningEnabled
	return r.versioned, nil
}

func (r *objectRemover) versionsPage(ctx context.Context, listed string, token any) ([]target, any, error) {
	it := r.gcs.Bucket(r.gcsBucket).Objects(ctx, &storage.Query{Prefix: listed, Versions: true})
	tok, _ := token.(string)
	var attrs []*storage.ObjectAttrs
	next, err := iterator.NewPager(it, listPageSize, tok).NextPage(&attrs)
	if err != nil {
		return nil, nil, err
	}
	ts := make([]target, 0, len(attrs))
	for _, a := range attrs {
		// A noncurrent generation has the time it stopped being live.
		ts = append(ts, target{raw: a.Name, version: strconv.FormatInt(a.Generation, 10), size: a.Size, latest: a.Deleted.IsZero()})
	}
	if next == "" {
		return ts, nil, nil
	}
	return ts, next, nil
}

// listVersions pages through every version under the prefix and hands
// batches of targets to emit. The keys handed on are the store's keys less
// the bucket's own prefix (of a blob.PrefixedBucket); gocloud's escaping
// of unusual characters (which the prefix itself never has: CheckPrefix)
// is not undone in them.
func (d *deletion) listVersions(ctx context.Context, emit func([]target) error) error {
	vl := d.rm.(versionLister)
	if err := d.checkEffectivePrefix(); err != nil {
		return err
	}
	listed, _ := d.rm.listedPrefix()
	bucketPrefix := strings.TrimSuffix(listed, d.prefix)
	n := d.rm.batchSize()
	batch := make([]target, 0, n)
	var token any
	for {
		var page []target
		var next any
		err := d.retry.do(ctx, d.clock, transient, func() error {
			var err error
			page, next, err = vl.versionsPage(ctx, listed, token)
			return err
		})
		if err != nil {
			return fmt.Errorf("list versions: %w", err)
		}
		// Stores list versions and markers apart (S3) or oldest first
		// (GCS): list them by key, the latest version of a key first.
		slices.SortStableFunc(page, func(a, b target) int {
			if c := strings.Compare(a.raw, b.raw); c != 0 {
				return c
			}
			switch {
			case a.latest && !b.latest:
				return -1
			case b.latest && !a.latest:
				return 1
			}
			return 0
		})
		d.mu.Lock()
		anyFailed := len(d.failed) > 0
		d.mu.Unlock()
		var listedN, bytes int64
		for _, t := range page {
			// A key outside the bucket's prefix keeps its raw spelling,
			// which the check before deletion refuses.
			t.key = t.raw
			if strings.HasPrefix(t.raw, bucketPrefix) {
				t.key = t.raw[len(bucketPrefix):]
			}
			if anyFailed && d.isFailed(t.id()) {
				continue
			}
			listedN++
			bytes += t.size
			batch = append(batch, t)
			if len(batch) == n {
				if err := emit(batch); err != nil {
					return err
				}
				batch = make([]target, 0, n)
			}
		}
		d.report(func(p *DeleteProgress) { p.Listed += listedN; p.ListedBytes += bytes })
		if next == nil {
			break
		}
		token = next
	}
	if len(batch) > 0 {
		return emit(batch)
	}
	return nil
}

// lockCodes are the codes of a DeleteObjects error entry for a version the
// store keeps under Object Lock: AWS says AccessDenied, MinIO
// InvalidRequest ("Object is WORM protected").
var lockCodes = []string{"AccessDenied", "InvalidRequest"}

// retention looks up the Object Lock of the versions whose deletion was
// refused with one of lockCodes (one HeadObject each, 16 at a time), on
// buckets with Object Lock enabled (one GetObjectLockConfiguration per
// call, the first time a deletion is refused), and replaces their errors
// with a *Retention where a lock is on.
func (r *s3Remover) retention(ctx context.Context, ts []target, errs []error) {
	var idx []int
	for i, err := range errs {
		var ke *s3KeyError
		if ts[i].version != "" && !ts[i].marker && errors.As(err, &ke) && slices.Contains(lockCodes, ke.Code) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 || !r.lockEnabled(ctx) {
		return
	}
	bucket := r.bucket.Load()
	forEach(ctx, len(idx), 16, func(j int) error {
		i := idx[j]
		out, err := r.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String(ts[i].raw), VersionId: aws.String(ts[i].version)})
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

// dryRunRetention sets the Retention of every version in vs that S3 Object
// Lock would keep from being deleted at now, on buckets with Object Lock
// enabled: one GetObjectLockConfiguration, then one HeadObject a version
// (16 at a time). Governance retention does not count when bypass is set.
// raw holds the store's key of each version (vs holds the bucket's).
func (r *s3Remover) dryRunRetention(ctx context.Context, vs []ObjectVersion, raw []string, now time.Time, bypass bool) error {
	if !r.lockEnabled(ctx) {
		return nil
	}
	bucket := r.bucket.Load()
	return errors.Join(forEach(ctx, len(vs), 16, func(i int) error {
		v := &vs[i]
		if v.DeleteMarker || v.VersionID == "" {
			return nil
		}
		out, err := r.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bucket, Key: aws.String(raw[i]), VersionId: aws.String(v.VersionID)})
		if err != nil {
			return fmt.Errorf("look up the object lock of %s (version %s): %w", v.Key, v.VersionID, err)
		}
		v.Retention = retentionOf(out, now, bypass)
		return nil
	})...)
}

// retentionOf is the lock a HeadObject answer shows that keeps the version
// from being deleted at now (zero: whenever), or nil: a retention period
// not over (governance not counted when bypass is set), or a legal hold.
func retentionOf(out *s3.HeadObjectOutput, now time.Time, bypass bool) *Retention {
	ret := &Retention{LegalHold: out.ObjectLockLegalHoldStatus == s3types.ObjectLockLegalHoldStatusOn}
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
func (r *s3Remover) lockEnabled(ctx context.Context) bool {
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
