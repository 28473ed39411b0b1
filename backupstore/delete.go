package backupstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"gocloud.dev/blob"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// ErrIncomplete is returned, wrapped in a *DeleteError, when DeletePrefix
// could not delete every object under the prefix: some keys failed, the
// listing failed, or the context ended. Running DeletePrefix again finishes
// the job.
var ErrIncomplete = errclass.Retryable("backupstore: deletion incomplete")

// DeleteOptions configure DeletePrefix. nil means the defaults.
type DeleteOptions struct {
	// PrefixRules opt in to prefixes CheckPrefix refuses by default.
	PrefixRules
	// DryRun lists what would be deleted, in DeleteResult.Keys and Bytes,
	// and deletes nothing. On a versioned bucket DeleteResult.Versions
	// lists every version and delete marker with its bytes; on an S3 bucket
	// with Object Lock enabled, each version the lock would keep now carries
	// its Retention (at the cost of one HeadObject a version).
	DryRun bool
	// Concurrency bounds the delete requests in flight, at most
	// MaxConcurrency. The default (0) is 4 for stores with a batch API (each
	// request deletes up to 1,000 S3 keys or 256 Azure blobs) and 16 for
	// the others. On Azure without the batch API (Azurite, BatchNever)
	// each batch is deleted 16 blobs at a time, so up to 16 times
	// Concurrency requests are in flight. Goroutines are started as work
	// appears, never more than there are requests to send.
	Concurrency int
	// AzureBatch chooses how Azure Blob deletes are sent: BatchAuto (the
	// zero value) uses the Blob Batch API except against the Azure Storage
	// emulator (account devstoreaccount1), where single deletes 16 at a time
	// are faster; BatchAlways and BatchNever force the choice. Other stores
	// ignore it.
	AzureBatch BatchMode
	// Retry configures the retries of transient errors.
	Retry Retry
	// Progress, when set, is called with the running totals after every
	// listed page and every completed request, and once more at the end,
	// with Done set. Calls come from one goroutine, in order, and all
	// return before DeletePrefix does; no lock is held during a call, so a
	// slow callback never stalls the deletion, it only falls behind.
	Progress func(DeleteProgress)
	// Clock times the waits between retries. Default clock.RealClock{}.
	Clock clock.WithTicker

	// KeepNoncurrentVersions deletes only the current version of each
	// object on a versioned bucket, as a plain delete does: the store
	// writes a delete marker (GCS: makes the live generation noncurrent)
	// and keeps, and bills, every older version.
	// By default DeletePrefix deletes every version and every delete
	// marker under the prefix, so that a deleted backup stops costing
	// money. With it set, DeletePrefix does not ask whether the bucket is
	// versioned.
	KeepNoncurrentVersions bool
	// BucketPrefix states the bucket's own prefix, the one
	// blob.PrefixedBucket (or prefix= in a URL) puts before every key, for
	// a bucket whose prefix DeletePrefix cannot see: a fileblob or memblob
	// bucket not opened by OpenBucket. nil states nothing; a pointer to ""
	// states that the bucket has no prefix of its own. The effective
	// prefix, *BucketPrefix followed by the prefix, is checked as any
	// other. Where the bucket's prefix can be seen (the store's listing
	// request on S3, GCS and Azure; OpenBucket), a stated one that differs
	// is refused.
	BucketPrefix *string
	// AllowUnknownBucketPrefix lets the empty prefix through on a bucket
	// whose own prefix can neither be seen nor is stated (BucketPrefix):
	// the caller vouches that b is not a view (blob.PrefixedBucket) of a
	// larger bucket under a prefix without a trailing Separator. Without
	// it, such a deletion is refused with a *PrefixError before anything
	// is deleted.
	AllowUnknownBucketPrefix bool
	// BypassGovernanceRetention deletes object versions under S3 Object
	// Lock retention in governance mode (the request carries
	// x-amz-bypass-governance-retention, and the caller needs the
	// s3:BypassGovernanceRetention permission). Versions in compliance
	// mode or under a legal hold are never deleted. Without it, nothing
	// under retention is deleted: see RetainedError.
	BypassGovernanceRetention bool
	// Last, when set, is a key under the prefix that is deleted only once
	// every other object under the prefix is gone, and left in place when
	// anything else could not be deleted. An owner marker (WriteMarker)
	// deleted Last still proves whose the rest is when a deletion is cut
	// short, by an error or by the process ending, so that the retry can
	// prove it again. A dry run lists it with the others.
	Last string
}

// Retry configures how transient errors (5xx, 429, timeouts, broken
// connections) are retried: up to Attempts tries per request, waiting
// Initial, then twice as long each time up to Max.
type Retry struct {
	Attempts     int           // default 6
	Initial, Max time.Duration // default 100ms, 5s
}

func (r Retry) withDefaults() Retry {
	if r.Attempts <= 0 {
		r.Attempts = 6
	}
	if r.Initial <= 0 {
		r.Initial = 100 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 5 * time.Second
	}
	return r
}

// do calls f until it succeeds, fails with an error that retryable
// rejects, or has been tried r.Attempts times, waiting r.backoff on clk
// between tries. A canceled ctx ends the wait; do returns the last error of
// f. Deletion retries every transient error; a copy (transientPresent) does
// not retry NotFound, which there means the object is gone.
func (r Retry) do(ctx context.Context, clk clock.WithTicker, retryable func(context.Context, error) bool, f func() error) error {
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || attempt >= r.Attempts || !retryable(ctx, err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-clk.After(r.backoff(attempt)):
		}
	}
}

// backoff returns the wait before try number attempt+1.
func (r Retry) backoff(attempt int) time.Duration {
	d := r.Initial
	for i := 1; i < attempt && d < r.Max; i++ {
		d *= 2
	}
	return min(d, r.Max)
}

// DeleteProgress are the running totals of a DeletePrefix call.
type DeleteProgress struct {
	// Listed and ListedBytes count the objects found under the prefix so far.
	Listed, ListedBytes int64
	// Deleted and DeletedBytes count the objects that are gone, including
	// those that were already gone when the delete request arrived.
	Deleted, DeletedBytes int64
	// Failed counts the objects whose deletion failed for good.
	Failed int64
	// Done is set in the final call.
	Done bool
}

// DeleteResult says what DeletePrefix did.
type DeleteResult struct {
	DeleteProgress
	// AlreadyGone counts the objects that had been deleted by someone else
	// between listing and deletion; they are included in Deleted.
	AlreadyGone int64
	// Keys are, for a dry run, the keys that would be deleted, in listing
	// order, each once. Bytes is the total size of what would be deleted:
	// on a versioned bucket, of every version.
	Keys  []string
	Bytes int64
	// Versions are, for a dry run on a versioned bucket, the versions and
	// delete markers (GCS: generations) that would be deleted, in listing
	// order (by key, the current version of a key first). Listed and
	// Deleted count them too.
	Versions []ObjectVersion
	// Versioned is set when DeletePrefix found the bucket versioned (S3
	// versioning Enabled or Suspended, GCS object versioning enabled) and
	// deleted versions, not keys.
	Versioned bool
	// FailedKeys are the keys that could not be deleted, with the reason:
	// the first MaxFailedKeys of them (Failed counts them all).
	FailedKeys []KeyError
	// Method is how objects were deleted: "s3-batch" (DeleteObjects),
	// "s3-versions" (DeleteObjects naming each version, on a versioned
	// bucket), "azure-batch" (Blob Batch), "per-object", "per-version"
	// (one request per GCS generation), or "none" for a dry run.
	Method string
}

// KeyError is the failure to delete or copy one key, or one version of it.
type KeyError struct {
	Key string
	// VersionID is the version whose deletion failed, on a versioned
	// bucket; empty otherwise.
	VersionID string
	Err       error
}

func (e KeyError) Error() string {
	if e.VersionID != "" {
		return fmt.Sprintf("%s (version %s): %v", e.Key, e.VersionID, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Key, e.Err)
}

// Terminal reports false: the error is retried, or judged by the error
// it wraps (crt.Terminal).
func (KeyError) Terminal() bool { return false }

// DeleteError is returned when DeletePrefix did not finish. Failed names
// exactly the keys whose deletion was not confirmed (those of a request in
// flight when the context ended may be gone nevertheless), up to
// MaxFailedKeys of them; Unnamed counts the failed keys beyond. Keys not yet
// listed when it stopped are not named (rerun to delete them). It unwraps
// to ErrIncomplete and to Err, the cause that stopped the run (a listing
// error or the context's error), when there is one.
type DeleteError struct {
	Prefix  string
	Failed  []KeyError
	Unnamed int64
	Err     error
}

// MaxFailedKeys bounds the failed keys DeletePrefix names (DeleteResult.
// FailedKeys, DeleteError.Failed) and remembers, so that its memory does not
// grow with the number of keys when a store refuses them all: past it, the
// failures are only counted, and DeletePrefix stops after the pass under
// way (a later pass could not tell the failed keys from new ones).
const MaxFailedKeys = 10_000

// maxFailedKeys is MaxFailedKeys; tests lower it.
var maxFailedKeys = MaxFailedKeys

func (e *DeleteError) Error() string {
	return incomplete(fmt.Sprintf("backupstore: delete prefix %q incomplete", e.Prefix), e.Err, e.Failed, e.Unnamed)
}

// Terminal reports false: the error is retried, or judged by the error
// it wraps (crt.Terminal).
func (*DeleteError) Terminal() bool { return false }

// incomplete is the message of an operation that did not finish: what,
// the error that stopped it, and the first three keys that failed of the
// failed ones and the unnamed ones.
func incomplete(what string, err error, failed []KeyError, unnamed int64) string {
	var b strings.Builder
	b.WriteString(what)
	if err != nil {
		fmt.Fprintf(&b, ": %v", err)
	}
	if n := len(failed); n > 0 {
		fmt.Fprintf(&b, "; %d keys failed", int64(n)+unnamed)
		for i, f := range failed {
			if i == 3 {
				fmt.Fprintf(&b, ", and %d more", int64(n-3)+unnamed)
				break
			}
			fmt.Fprintf(&b, "; %s", f.Error())
		}
	}
	return b.String()
}

// Unwrap returns ErrIncomplete, Err, and a *RetainedError (which is
// ErrRetained) when some of the failed versions are under Object Lock.
func (e *DeleteError) Unwrap() []error {
	errs := []error{ErrIncomplete}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if re := e.Retained(); re != nil {
		errs = append(errs, re)
	}
	return errs
}

// Keys returns the failed keys.
func (e *DeleteError) Keys() []string {
	keys := make([]string, len(e.Failed))
	for i, f := range e.Failed {
		keys[i] = f.Key
	}
	return keys
}

// BatchMode says whether a store's batch delete API is used.
type BatchMode int

// The batch modes of DeleteOptions.AzureBatch.
const (
	// BatchAuto uses the batch API where it is the faster way.
	BatchAuto BatchMode = iota
	// BatchAlways uses the batch API.
	BatchAlways
	// BatchNever deletes one object per request.
	BatchNever
)

const (
	listPageSize = 1000
	// listAllPageSize is the page size where a whole listing is wanted
	// (dry runs, copies): gocloud fills a page from several driver pages
	// where the store's maximum is smaller, and fileblob, whose pages follow
	// the directory walk and not key order, cannot skip keys between pages
	// of a listing that fits one page.
	listAllPageSize = 100_000
	maxPasses       = 5
)

// DeletePrefix deletes every object whose key starts with prefix, and
// nothing else. The prefix must pass CheckPrefix with opts.PrefixRules, and
// so must the effective prefix the store lists where b has a prefix of its
// own (a blob.PrefixedBucket, or a URL with prefix= opened by OpenBucket):
// that prefix must end in Separator too unless opts.AllowPartial, so a
// bucket opened with prefix=tenant-a is refused, because its keys include
// those of "tenant-ab/". The effective prefix is known from the listing
// request on Azure, from gocloud without a request on S3 and GCS, and from
// OpenBucket or opts.BucketPrefix for the others; it is checked before
// anything is deleted. Where it is not known, the empty prefix is refused
// unless opts.AllowUnknownBucketPrefix.
// Listing and deletion run at the same time; deletion uses the store's batch
// API where there is one (S3 DeleteObjects, Azure Blob Batch) and bounded
// concurrency elsewhere. Objects that are already gone count as deleted, so
// a rerun after an interruption finishes the job. On a versioned S3 or GCS
// bucket every version (and delete marker) under the prefix is deleted,
// unless opts.KeepNoncurrentVersions; versions under S3 Object Lock are
// left, and reported in a *RetainedError (see the package doc).
//
// The result is never nil. The error is a *PrefixError (nothing was
// deleted; for an effective prefix on Azure, one listing request was made)
// or a *DeleteError naming the keys that failed.
func DeletePrefix(ctx context.Context, b *blob.Bucket, prefix string, opts *DeleteOptions) (*DeleteResult, error) {
	if opts == nil {
		opts = &DeleteOptions{}
	}
	res := &DeleteResult{Method: "none"}
	if err := checkDeleteOptions(prefix, opts); err != nil {
		return res, err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("prefix", prefix)
	rm, err := removerFor(b, opts)
	if err != nil {
		return res, err
	}
	d := &deletion{
		bucket: b, prefix: prefix, rm: rm, opts: opts, log: log, res: res,
		retry: opts.Retry.withDefaults(), clock: opts.Clock, failed: map[string]bool{},
		progress: newNotifier(opts.Progress),
	}
	defer d.progress.close()
	if d.clock == nil {
		d.clock = clock.RealClock{}
	}
	if vl, ok := rm.(driver.VersionLister); ok && !opts.KeepNoncurrentVersions {
		// One request per call; the bucket's name and the prefix it lists
		// come from gocloud without a request.
		versioned, err := vl.ProbeVersioning(ctx, d)
		if pe := (*PrefixError)(nil); errors.As(err, &pe) {
			return res, err
		}
		if err != nil {
			return res, &DeleteError{Prefix: prefix, Err: err}
		}
		d.versioned = versioned
		res.Versioned = versioned
	}
	if opts.DryRun {
		return res, d.dryRun(ctx)
	}
	// Passes after the first normally list nothing, at the cost of one
	// listing request. They catch objects a listing skipped (gocloud's
	// fileblob pages in directory-walk order, which is not key order, and
	// can skip keys such as "p/x-y/1" after "p/x/1") and objects written
	// while the deletion ran.
	d.spare = opts.Last
	err = d.passes(ctx)
	if err == nil && len(res.FailedKeys) == 0 && d.unnamed == 0 && d.spare != "" {
		// Everything else is gone: now the last key, and whatever was
		// written meanwhile.
		d.spare = ""
		err = d.passes(ctx)
	}
	if pe := (*PrefixError)(nil); errors.As(err, &pe) {
		return res, err
	}
	res.Method = rm.Method()
	d.report(func(p *DeleteProgress) { p.Done = true })
	if err != nil || len(res.FailedKeys) > 0 {
		log.Info("deletion incomplete", "deleted", res.Deleted, "failed", len(res.FailedKeys), "error", err)
		return res, &DeleteError{Prefix: prefix, Failed: res.FailedKeys, Unnamed: d.unnamed, Err: err}
	}
	log.V(1).Info("deleted prefix", "objects", res.Deleted, "bytes", res.DeletedBytes, "method", res.Method)
	return res, nil
}

// checkDeleteOptions refuses a prefix or options DeletePrefix cannot use,
// naming the field and its value.
func checkDeleteOptions(prefix string, opts *DeleteOptions) error {
	if err := CheckPrefix(prefix, opts.PrefixRules); err != nil {
		return err
	}
	if opts.AzureBatch < BatchAuto || opts.AzureBatch > BatchNever {
		return fmt.Errorf("%w: DeleteOptions.AzureBatch = %d: want BatchAuto, BatchAlways or BatchNever", ErrInvalidConfig, opts.AzureBatch)
	}
	if err := checkConcurrency("DeleteOptions.Concurrency", opts.Concurrency); err != nil {
		return err
	}
	if opts.Last != "" && !strings.HasPrefix(opts.Last, prefix) {
		return fmt.Errorf("%w: DeleteOptions.Last = %q: not a key under the prefix %q", ErrInvalidConfig, opts.Last, prefix)
	}
	return nil
}

// dryRun lists what a deletion would delete into the result (Keys, and
// with versions Versions and their retention), and deletes nothing; on an
// error the result names nothing.
func (d *deletion) dryRun(ctx context.Context) error {
	res := d.res
	var versions []driver.Target
	err := d.list(ctx, listAllPageSize, func(ts []driver.Target) error {
		for _, t := range ts {
			if n := len(res.Keys); n == 0 || res.Keys[n-1] != t.Key || !d.versioned {
				res.Keys = append(res.Keys, t.Key)
			}
			if d.versioned {
				res.Versions = append(res.Versions, ObjectVersion{Key: t.Key, VersionID: t.Version, DeleteMarker: t.Marker, Latest: t.Latest, Size: t.Size})
				versions = append(versions, t)
			}
		}
		return nil
	})
	if rl, ok := d.rm.(driver.RetentionLister); ok && err == nil && d.versioned {
		var locks []error
		locks, err = rl.Retention(ctx, versions, d.clock.Now(), d.opts.BypassGovernanceRetention)
		for i, l := range locks {
			if r := (*Retention)(nil); errors.As(l, &r) {
				res.Versions[i].Retention = r
			}
		}
	}
	res.Bytes = res.ListedBytes
	if pe := (*PrefixError)(nil); errors.As(err, &pe) {
		res.Keys, res.Bytes = nil, 0
		return err
	}
	if err != nil {
		res.Keys, res.Versions, res.Bytes = nil, nil, 0
		return &DeleteError{Prefix: d.prefix, Err: err}
	}
	return nil
}

// passes runs deletion passes until one finds nothing.
func (d *deletion) passes(ctx context.Context) error {
	for pass := 1; ; pass++ {
		found, err := d.run(ctx)
		if err != nil || found == 0 || d.unnamed > 0 {
			return err
		}
		if pass == maxPasses {
			return fmt.Errorf("objects still appear under the prefix after %d passes", maxPasses)
		}
	}
}

type deletion struct {
	bucket *blob.Bucket
	prefix string
	rm     driver.Remover
	opts   *DeleteOptions
	log    logr.Logger
	retry  Retry
	clock  clock.WithTicker
	// versioned: the store is an S3 bucket with versioning, and every
	// version and delete marker under the prefix is deleted.
	versioned bool
	// spare is the key (DeleteOptions.Last) that the passes leave, until
	// every other object is gone.
	spare string

	mu     sync.Mutex // guards res, failed and unnamed
	res    *DeleteResult
	failed map[string]bool // target ids that failed for good: not retried by later passes
	// unnamed counts the failures past maxFailedKeys, neither named nor
	// remembered.
	unnamed int64

	progress *notifier[DeleteProgress]
}

// Bucket, Prefix, CheckEffectivePrefix and Retry make a deletion the
// driver.Run of its remover.
func (d *deletion) Bucket() *blob.Bucket { return d.bucket }
func (d *deletion) Prefix() string       { return d.prefix }

// Retry calls f with the deletion's retries of transient errors.
func (d *deletion) Retry(ctx context.Context, f func() error) error {
	return d.retry.do(ctx, d.clock, transient, f)
}

// report applies f to the running totals and queues them for Progress.
// The queueing happens under the lock so that the calls see the totals in
// order; the calls themselves run on the notifier's goroutine.
func (d *deletion) report(f func(*DeleteProgress)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(&d.res.DeleteProgress)
	d.progress.send(d.res.DeleteProgress)
}

// list pages through the prefix and hands batches of targets to emit.
func (d *deletion) list(ctx context.Context, pageSize int, emit func([]driver.Target) error) error {
	if d.versioned {
		return d.listVersions(ctx, emit)
	}
	lo := &blob.ListOptions{Prefix: d.prefix}
	d.rm.Prepare(lo)
	n := d.rm.BatchSize()
	batch := make([]driver.Target, 0, n)
	token := blob.FirstPageToken
	for {
		var (
			objs []*blob.ListObject
			next []byte
		)
		err := d.retry.do(ctx, d.clock, transient, func() error {
			var err error
			objs, next, err = d.bucket.ListPage(ctx, token, pageSize, lo)
			return err
		})
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		// The request just made tells the prefix the store listed: check
		// it before any key of it is handed on.
		if err := d.CheckEffectivePrefix(); err != nil {
			return err
		}
		var listed, bytes int64
		d.mu.Lock()
		anyFailed := len(d.failed) > 0 // read under the lock: workers add to it
		d.mu.Unlock()
		for _, o := range objs {
			if o.IsDir || o.Key == d.spare && d.spare != "" || anyFailed && d.isFailed(o.Key) {
				continue
			}
			t := driver.Target{Key: o.Key, Raw: o.Key, Size: o.Size}
			if raw, ok := d.rm.Raw(o); ok {
				t.Raw = raw
			}
			listed++
			bytes += o.Size
			batch = append(batch, t)
			if len(batch) == n {
				if err := emit(batch); err != nil {
					return err
				}
				batch = make([]driver.Target, 0, n)
			}
		}
		d.report(func(p *DeleteProgress) { p.Listed += listed; p.ListedBytes += bytes })
		if len(next) == 0 {
			break
		}
		token = next
	}
	if len(batch) > 0 {
		return emit(batch)
	}
	return nil
}

// effectivePrefix returns the prefix the store lists: the bucket's own
// prefix (a blob.PrefixedBucket, or prefix= in a URL opened by OpenBucket)
// followed by d.prefix, and the bucket's own prefix. ok is false when
// neither the store's listing request, nor OpenBucket, nor the caller
// (DeleteOptions.BucketPrefix) tells the bucket's prefix.
func (d *deletion) effectivePrefix() (eff, bucketPrefix string, ok bool, err error) {
	seen, known := d.rm.ListedPrefix()
	if known {
		if !strings.HasSuffix(seen, d.prefix) {
			return "", "", false, &PrefixError{Prefix: seen, Reason: fmt.Sprintf("the store listed this prefix, which does not end in the prefix %q given", d.prefix)}
		}
		bucketPrefix = strings.TrimSuffix(seen, d.prefix)
	} else if bp, ok := openedPrefix(d.bucket); ok {
		bucketPrefix, known = bp, true
	}
	if stated := d.opts.BucketPrefix; stated != nil {
		if known && *stated != bucketPrefix {
			return "", "", false, &PrefixError{Prefix: *stated + d.prefix, Reason: fmt.Sprintf("DeleteOptions.BucketPrefix = %q, but the bucket's own prefix is %q", *stated, bucketPrefix)}
		}
		bucketPrefix, known = *stated, true
	}
	return bucketPrefix + d.prefix, bucketPrefix, known, nil
}

// CheckEffectivePrefix applies the rules of CheckPrefix to the prefix the
// store lists, not only to the caller's: a bucket opened with
// prefix=tenant-a holds "tenant-ab/secret" as key "b/secret", so deleting
// its "" (or "b/") would delete another tenant's data. Where the bucket's
// own prefix cannot be known, the empty prefix (which would select
// everything under it, siblings included when it lacks a trailing
// Separator) is refused unless the caller opts out.
func (d *deletion) CheckEffectivePrefix() error {
	eff, bucketPrefix, ok, err := d.effectivePrefix()
	if err != nil {
		return err
	}
	if !ok {
		if d.prefix == "" && !d.opts.AllowUnknownBucketPrefix {
			return &PrefixError{Prefix: d.prefix, Reason: "empty prefix on a bucket whose own prefix cannot be seen (a blob.PrefixedBucket over fileblob or memblob not opened by OpenBucket): it would select every key under that prefix, those of siblings sharing its leading characters included; state the bucket's prefix in DeleteOptions.BucketPrefix, open the bucket with OpenBucket, or set DeleteOptions.AllowUnknownBucketPrefix"}
		}
		return nil
	}
	if bucketPrefix == "" {
		return nil
	}
	if err := CheckPrefix(eff, PrefixRules{AllowPartial: d.opts.AllowPartial}); err != nil {
		return &PrefixError{Prefix: eff, Reason: fmt.Sprintf("bucket prefix %q followed by %q: %s", bucketPrefix, d.prefix, err.(*PrefixError).Reason)}
	}
	if !d.opts.AllowPartial && !strings.HasSuffix(bucketPrefix, Separator) {
		return &PrefixError{Prefix: eff, Reason: fmt.Sprintf("bucket prefix %q does not end in %s, so the bucket also holds the keys of siblings sharing its leading characters", bucketPrefix, Separator)}
	}
	return nil
}

func (d *deletion) isFailed(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failed[id]
}

func (d *deletion) wait(ctx context.Context, attempt int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-d.clock.After(d.retry.backoff(attempt)):
		return nil
	}
}

// run pipelines listing and deletion, and returns the number of objects
// found.
func (d *deletion) run(ctx context.Context) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := d.opts.Concurrency
	if workers == 0 {
		workers = d.rm.Concurrency()
	}
	// A goroutine per batch, started when the listing hands the batch on,
	// at most workers at once: a large Concurrency costs nothing where
	// there is little to delete.
	sem := make(chan struct{}, workers)
	var wg sync.WaitGroup
	found := 0
	listErr := d.list(ctx, listPageSize, func(ts []driver.Target) error {
		found += len(ts)
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			d.deleteBatch(ctx, ts)
		}()
		return nil
	})
	wg.Wait()
	if listErr != nil {
		return found, listErr
	}
	return found, ctx.Err()
}

// deleteBatch deletes ts, retrying the keys that failed transiently, and
// records the outcome of every key.
func (d *deletion) deleteBatch(ctx context.Context, ts []driver.Target) {
	var failed []KeyError
	pending := make([]driver.Target, 0, len(ts))
	// The last line of defence: whatever the listing returned, only keys
	// under the prefix, in both spellings, reach the store. The store's
	// spelling of the prefix ends with ours; it is longer when b is a
	// blob.PrefixedBucket (a bucket URL with prefix=).
	rawPrefix := d.prefix
	if p, ok := d.rm.ListedPrefix(); ok && strings.HasSuffix(p, d.prefix) {
		rawPrefix = p
	}
	for _, t := range ts {
		if underPrefix(t.Key, d.prefix) && underPrefix(t.Raw, rawPrefix) {
			pending = append(pending, t)
		} else {
			d.log.Error(driver.ErrOutsidePrefix, "listing returned a key outside the prefix", "key", t.Key)
			failed = append(failed, KeyError{Key: t.Key, VersionID: t.Version, Err: driver.ErrOutsidePrefix})
		}
	}
	var deleted, gone, bytes int64
	for attempt := 1; len(pending) > 0; attempt++ {
		if ctx.Err() != nil {
			for _, t := range pending {
				failed = append(failed, KeyError{Key: t.Key, VersionID: t.Version, Err: ctx.Err()})
			}
			break
		}
		errs := d.rm.Remove(ctx, pending)
		var again []driver.Target
		for i, t := range pending {
			switch err := errs[i]; {
			case err == nil || errors.Is(err, driver.ErrGone):
				deleted++
				bytes += t.Size
				if err != nil {
					gone++
				}
			case attempt < d.retry.Attempts && transient(ctx, err):
				again = append(again, t)
			default:
				failed = append(failed, KeyError{Key: t.Key, VersionID: t.Version, Err: err})
			}
		}
		pending = again
		if len(pending) > 0 {
			d.log.V(1).Info("retrying transient delete failures", "keys", len(pending), "attempt", attempt)
			if err := d.wait(ctx, attempt); err != nil {
				for _, t := range pending {
					failed = append(failed, KeyError{Key: t.Key, VersionID: t.Version, Err: err})
				}
				break
			}
		}
	}
	d.report(func(p *DeleteProgress) {
		p.Deleted += deleted
		p.DeletedBytes += bytes
		p.Failed += int64(len(failed))
		d.res.AlreadyGone += gone
		for _, f := range failed {
			if len(d.res.FailedKeys) >= maxFailedKeys {
				d.unnamed++
				continue
			}
			d.res.FailedKeys = append(d.res.FailedKeys, f)
			d.failed[driver.Target{Key: f.Key, Version: f.VersionID}.ID()] = true
		}
	})
}
