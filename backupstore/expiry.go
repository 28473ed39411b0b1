package backupstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithy "github.com/aws/smithy-go"
	"github.com/go-logr/logr"
	"gocloud.dev/blob"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/internal/storeerr"
)

// ErrExpiryUnsupported is returned by ExpirePrefix, RemoveExpiry and
// PruneExpiry for a bucket whose lifecycle API this package does not
// reach: every store but S3 (GCS and Azure have lifecycle management, but
// their emulators here have none to test against, so no code path for
// them is shipped).
var ErrExpiryUnsupported = storeerr.ErrExpiryUnsupported

// ErrTooManyRules is returned when adding this package's rules would take
// the bucket's lifecycle configuration past the store's limit (S3: 1,000
// rules). Nothing is written.
var ErrTooManyRules = storeerr.ErrTooManyRules

// maxLifecycleRules is S3's limit of rules in one configuration.
const maxLifecycleRules = 1000

// ruleIDPrefix starts the ID of every lifecycle rule this package owns;
// rules with any other ID are never changed or removed.
const ruleIDPrefix = "groundskeeper/"

// ExpiryOptions configure ExpirePrefix, RemoveExpiry and PruneExpiry. nil
// means the defaults.
type ExpiryOptions struct {
	// PrefixRules opt in to prefixes CheckPrefix refuses by default, as
	// for DeletePrefix: an expiry rule deletes everything under its prefix.
	PrefixRules
	// DryRun computes the rules and says whether the configuration would
	// change, and writes nothing.
	DryRun bool
	// Retry configures the retries of transient errors.
	Retry Retry
	// Clock times the waits between retries. Default clock.RealClock{}.
	Clock clock.WithTicker
}

// ExpiryRule is one lifecycle rule this package owns.
type ExpiryRule struct {
	// ID identifies the rule in the bucket's lifecycle configuration.
	ID string
	// Prefix is the prefix the rule applies to, as the store spells it
	// (with the prefix of a blob.PrefixedBucket).
	Prefix string
	// Date is the midnight (UTC) from which the store expires the current
	// version of every object under Prefix; zero for a rule that only
	// cleans up expired delete markers.
	Date time.Time
	// NoncurrentDays, on versioned buckets, is how many days after
	// becoming noncurrent a version expires.
	NoncurrentDays int32
	// ExpiredDeleteMarkers: the rule removes delete markers with no
	// version left behind them.
	ExpiredDeleteMarkers bool
}

// ExpiryResult says what ExpirePrefix, RemoveExpiry or PruneExpiry did.
type ExpiryResult struct {
	// Rules are this package's rules for the prefix after the call (for
	// RemoveExpiry and PruneExpiry: the rules removed).
	Rules []ExpiryRule
	// Changed is set when the configuration was written (for a dry run:
	// would have been).
	Changed bool
	// TotalRules is the number of rules in the bucket's configuration
	// after the call, foreign ones included.
	TotalRules int
	// Vanished are the IDs of rules that the call read and wrote back,
	// and that were gone when it read the configuration again right after
	// its write: another writer removed them, or wrote a configuration
	// older than ours. S3 cannot tell which; the call does not put them
	// back.
	Vanished []string
}

// ExpirePrefix asks the store to expire every object under prefix at or
// after at, with its own lifecycle engine: no request per object, and the
// data goes even when the operator that asked is gone. On S3 it installs
// a lifecycle rule filtered on the prefix with an expiration date at the
// first midnight UTC at or after at (S3 date rules take midnights only);
// on a versioned bucket the rule also expires noncurrent versions one day
// after they become noncurrent, and a second rule removes the delete
// markers left with no version behind them. Rules are identified by their
// ID (ruleIDPrefix followed by the prefix, or its SHA-256 when too long);
// rules with other IDs are kept as they are. Calling it again for the same
// prefix replaces its rules.
//
// When it takes effect is up to the store: S3 runs lifecycle rules once a
// day, so data under the prefix outlives at by up to about two days, but it
// does not outlive it indefinitely. Use it as the backstop for TTLs and the
// fast path for huge prefixes; use DeletePrefix to delete now.
//
// The prefix must pass CheckPrefix with opts.PrefixRules, and the
// effective prefix of a bucket with a prefix of its own the same rules as
// for DeletePrefix. The error is ErrExpiryUnsupported for stores other than
// S3, ErrTooManyRules at the store's rule limit, a *PrefixError for an
// unsafe prefix.
func ExpirePrefix(ctx context.Context, b *blob.Bucket, prefix string, at time.Time, opts *ExpiryOptions) (*ExpiryResult, error) {
	if at.IsZero() {
		return nil, fmt.Errorf("%w: expire prefix %q: at = %v: must be set", ErrInvalidConfig, prefix, at)
	}
	lc, err := openLifecycle(ctx, b, prefix, opts)
	if err != nil {
		return nil, err
	}
	versioned, err := lc.versioned(ctx)
	if err != nil {
		return nil, err
	}
	want := ownRules(lc.prefix, midnightAtOrAfter(at), versioned)
	res, err := lc.update(ctx, func(rules []s3types.LifecycleRule) []s3types.LifecycleRule {
		// Our rules take the place of the first of them, so that a call
		// that changes nothing writes nothing.
		out := make([]s3types.LifecycleRule, 0, len(rules)+len(want))
		placed := false
		for _, r := range rules {
			switch {
			case !lc.ownsForPrefix(r):
				out = append(out, r)
			case !placed:
				out = append(out, want...)
				placed = true
			}
		}
		if !placed {
			out = append(out, want...)
		}
		return out
	})
	if err != nil {
		return res, err
	}
	res.Rules = summarize(want)
	return res, nil
}

// RemoveExpiry removes this package's rules for prefix, leaving every other
// rule as it is. It is not an error when there are none.
func RemoveExpiry(ctx context.Context, b *blob.Bucket, prefix string, opts *ExpiryOptions) (*ExpiryResult, error) {
	lc, err := openLifecycle(ctx, b, prefix, opts)
	if err != nil {
		return nil, err
	}
	var removed []s3types.LifecycleRule
	res, err := lc.update(ctx, func(rules []s3types.LifecycleRule) []s3types.LifecycleRule {
		removed = nil
		var out []s3types.LifecycleRule
		for _, r := range rules {
			if lc.ownsForPrefix(r) {
				removed = append(removed, r)
			} else {
				out = append(out, r)
			}
		}
		return out
	})
	if res != nil {
		res.Rules = summarize(removed)
	}
	return res, err
}

// PruneExpiry removes this package's rules that are done: their date has
// passed (by the injected clock) and their prefix holds nothing any more,
// no object and no version or delete marker. A rule whose date is still
// ahead stays, even over an empty prefix: it is a backstop for data not
// written yet. It makes one listing request per prefix whose date has
// passed, and leaves every other rule as it is. The listing is of versions
// (ListObjectVersions), not of objects: MinIO hides the objects a due rule
// expires from ListObjectsV2 at once but deletes them later, and removing
// the rule in between would bring them back; its version listing still
// shows them. The bucket's own prefix
// (prefix= of OpenBucket, blob.PrefixedBucket) limits it to the rules
// under that prefix.
func PruneExpiry(ctx context.Context, b *blob.Bucket, opts *ExpiryOptions) (*ExpiryResult, error) {
	o := ExpiryOptions{}
	if opts != nil {
		o = *opts
	}
	o.AllowEmpty = true
	lc, err := openLifecycle(ctx, b, "", &o)
	if err != nil {
		return nil, err
	}
	empty := map[string]bool{}
	var removed []s3types.LifecycleRule
	res, err := lc.update(ctx, func(rules []s3types.LifecycleRule) []s3types.LifecycleRule {
		removed = nil
		// A prefix is due when no rule of ours for it has a date ahead.
		due := map[string]bool{}
		for _, r := range rules {
			if lc.owns(r) {
				p := rulePrefix(r)
				if _, ok := due[p]; !ok {
					due[p] = true
				}
				if r.Expiration != nil && r.Expiration.Date != nil && r.Expiration.Date.After(lc.d.clock.Now()) {
					due[p] = false
				}
			}
		}
		var out []s3types.LifecycleRule
		for _, r := range rules {
			p := rulePrefix(r)
			if !lc.owns(r) || !strings.HasPrefix(p, lc.prefix) || !due[p] {
				out = append(out, r)
				continue
			}
			isEmpty, seen := empty[p]
			if !seen {
				var err error
				if isEmpty, err = lc.isEmpty(ctx, p); err != nil {
					lc.err = err
					return rules
				}
				empty[p] = isEmpty
			}
			if isEmpty {
				removed = append(removed, r)
			} else {
				out = append(out, r)
			}
		}
		return out
	})
	if res != nil {
		res.Rules = summarize(removed)
	}
	return res, err
}

// midnightAtOrAfter is the first midnight UTC at or after t: an S3 date
// rule never expires anything before t.
func midnightAtOrAfter(t time.Time) time.Time {
	t = t.UTC()
	d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	if d.Before(t) {
		d = d.AddDate(0, 0, 1)
	}
	return d
}

// ruleID is the ID of this package's rule of kind for prefix. S3 IDs have
// at most 255 characters.
func ruleID(kind, prefix string) string {
	id := ruleIDPrefix + kind + "/" + prefix
	if len(id) > 255 {
		sum := sha256.Sum256([]byte(prefix))
		id = ruleIDPrefix + kind + "/sha256:" + hex.EncodeToString(sum[:])
	}
	return id
}

// ownRules are the rules that expire prefix from date.
func ownRules(prefix string, date time.Time, versioned bool) []s3types.LifecycleRule {
	r := s3types.LifecycleRule{
		ID:         aws.String(ruleID("expire", prefix)),
		Status:     s3types.ExpirationStatusEnabled,
		Filter:     &s3types.LifecycleRuleFilter{Prefix: aws.String(prefix)},
		Expiration: &s3types.LifecycleExpiration{Date: aws.Time(date)},
	}
	if !versioned {
		return []s3types.LifecycleRule{r}
	}
	r.NoncurrentVersionExpiration = &s3types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)}
	// S3 takes ExpiredObjectDeleteMarker only in a rule without a date.
	markers := s3types.LifecycleRule{
		ID:         aws.String(ruleID("markers", prefix)),
		Status:     s3types.ExpirationStatusEnabled,
		Filter:     &s3types.LifecycleRuleFilter{Prefix: aws.String(prefix)},
		Expiration: &s3types.LifecycleExpiration{ExpiredObjectDeleteMarker: aws.Bool(true)},
	}
	return []s3types.LifecycleRule{r, markers}
}

func summarize(rules []s3types.LifecycleRule) []ExpiryRule {
	var out []ExpiryRule
	for _, r := range rules {
		e := ExpiryRule{ID: aws.ToString(r.ID), Prefix: rulePrefix(r)}
		if r.Expiration != nil {
			if r.Expiration.Date != nil {
				e.Date = r.Expiration.Date.UTC()
			}
			e.ExpiredDeleteMarkers = aws.ToBool(r.Expiration.ExpiredObjectDeleteMarker)
		}
		if r.NoncurrentVersionExpiration != nil {
			e.NoncurrentDays = aws.ToInt32(r.NoncurrentVersionExpiration.NoncurrentDays)
		}
		out = append(out, e)
	}
	return out
}

// rulePrefix is the prefix a rule filters on (in the filter, or in the
// deprecated Prefix of the rule).
func rulePrefix(r s3types.LifecycleRule) string {
	if r.Filter != nil {
		if r.Filter.Prefix != nil {
			return *r.Filter.Prefix
		}
		if r.Filter.And != nil {
			return aws.ToString(r.Filter.And.Prefix)
		}
	}
	//lint:ignore SA1019 foreign rules may still use it
	return aws.ToString(r.Prefix) //nolint:staticcheck
}

// lifecycle is the S3 lifecycle configuration of one bucket, seen through
// one prefix.
type lifecycle struct {
	client *s3.Client
	bucket string
	prefix string // the effective prefix, as S3 spells it
	opts   *ExpiryOptions
	d      *deletion // for the prefix checks and retries
	err    error     // set by a modify function that failed
}

func openLifecycle(ctx context.Context, b *blob.Bucket, prefix string, opts *ExpiryOptions) (*lifecycle, error) {
	if opts == nil {
		opts = &ExpiryOptions{}
	}
	if err := CheckPrefix(prefix, opts.PrefixRules); err != nil {
		return nil, err
	}
	var client *s3.Client
	if !b.As(&client) {
		return nil, fmt.Errorf("%w (only S3 buckets have one here)", ErrExpiryUnsupported)
	}
	r := &s3Remover{client: client}
	d := &deletion{bucket: b, prefix: prefix, rm: r, opts: &DeleteOptions{PrefixRules: opts.PrefixRules},
		retry: opts.Retry.withDefaults(), clock: opts.Clock, log: logr.FromContextOrDiscard(ctx).WithValues("prefix", prefix)}
	if d.clock == nil {
		d.clock = clock.RealClock{}
	}
	if err := r.learn(ctx, d); err != nil {
		return nil, err
	}
	listed, _ := r.listedPrefix()
	return &lifecycle{client: client, bucket: aws.ToString(r.bucket.Load()), prefix: listed, opts: opts, d: d}, nil
}

// owns reports whether this package owns r.
func (lc *lifecycle) owns(r s3types.LifecycleRule) bool {
	return strings.HasPrefix(aws.ToString(r.ID), ruleIDPrefix)
}

// ownsForPrefix reports whether r is one of this package's rules for
// lc.prefix.
func (lc *lifecycle) ownsForPrefix(r s3types.LifecycleRule) bool {
	id := aws.ToString(r.ID)
	return id == ruleID("expire", lc.prefix) || id == ruleID("markers", lc.prefix)
}

func (lc *lifecycle) versioned(ctx context.Context) (bool, error) {
	var out *s3.GetBucketVersioningOutput
	err := lc.d.retry.do(ctx, lc.d.clock, transient, func() error {
		var err error
		out, err = lc.client.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(lc.bucket)})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("backupstore: expiry: GetBucketVersioning of bucket %q: %w", lc.bucket, err)
	}
	return out.Status != "", nil
}

// get reads the bucket's lifecycle rules; none when it has no
// configuration.
func (lc *lifecycle) get(ctx context.Context) ([]s3types.LifecycleRule, error) {
	var out *s3.GetBucketLifecycleConfigurationOutput
	err := lc.d.retry.do(ctx, lc.d.clock, transient, func() error {
		var err error
		out, err = lc.client.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(lc.bucket)})
		return err
	})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchLifecycleConfiguration" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("backupstore: expiry: GetBucketLifecycleConfiguration of bucket %q: %w", lc.bucket, err)
	}
	return out.Rules, nil
}

// write replaces the configuration with rules (deletes it when rules is
// empty: S3 refuses a configuration without rules). It sends the request
// once, with the SDK's own retries off: a write whose answer was lost may
// have been applied, and sending the same configuration again would erase
// whatever another writer did in between. update restarts from the read
// instead.
func (lc *lifecycle) write(ctx context.Context, rules []s3types.LifecycleRule) error {
	var err error
	if len(rules) == 0 {
		_, err = lc.client.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: aws.String(lc.bucket)}, sendOnce)
	} else {
		_, err = lc.client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
			Bucket:                 aws.String(lc.bucket),
			LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: rules},
		}, sendOnce)
	}
	if err != nil {
		return fmt.Errorf("backupstore: expiry: write the lifecycle configuration of bucket %q: %w", lc.bucket, err)
	}
	return nil
}

// sendOnce turns the SDK's retries off for one operation.
func sendOnce(o *s3.Options) { o.Retryer = aws.NopRetryer{} }

// maxUpdateAttempts bounds the restarts of update when the configuration
// keeps changing under it or its write keeps failing.
const maxUpdateAttempts = 5

// update reads the configuration, applies modify, and writes the result
// when it differs. A lifecycle PUT replaces the whole configuration and S3
// has no conditional PUT for it, so a rule another writer adds between
// the read and the write would be lost. Hence:
//
//   - update reads the configuration a second time right before writing,
//     and starts over from the newer one when it changed;
//   - the write is a read-modify-write and is never retried as a write:
//     it goes out once (the SDK's retries off), and a transient failure
//     starts over from the read, since the store may have applied it;
//   - it reads the configuration once more after writing: when a rule of
//     ours is missing (a writer that read before our write and wrote after
//     it dropped it), it starts over; every other rule it read and wrote
//     back is checked too, and those gone (removed by another writer, or
//     by a write of an older configuration) are named in
//     ExpiryResult.Vanished and logged.
//
// What remains is a window of one PUT request, in which a concurrent
// writer's change can still be lost; the doc says so.
func (lc *lifecycle) update(ctx context.Context, modify func([]s3types.LifecycleRule) []s3types.LifecycleRule) (*ExpiryResult, error) {
	res := &ExpiryResult{}
	for attempt := 1; ; attempt++ {
		before, err := lc.get(ctx)
		if err != nil {
			return res, err
		}
		after := modify(clone(before))
		if lc.err != nil {
			return res, lc.err
		}
		res.TotalRules = len(after)
		if reflect.DeepEqual(before, after) {
			res.TotalRules = len(before)
			return res, nil
		}
		if len(after) > maxLifecycleRules {
			return res, fmt.Errorf("%w: bucket %q has %d rules, and %d are wanted; the limit is %d", ErrTooManyRules, lc.bucket, len(before), len(after), maxLifecycleRules)
		}
		res.Changed = true
		if lc.opts.DryRun {
			return res, nil
		}
		again, err := lc.get(ctx)
		if err != nil {
			return res, err
		}
		if !reflect.DeepEqual(before, again) {
			if attempt == maxUpdateAttempts {
				return res, fmt.Errorf("backupstore: expiry: the lifecycle configuration of bucket %q changed under every one of %d attempts to update it", lc.bucket, attempt)
			}
			lc.d.log.V(1).Info("lifecycle configuration changed while updating it; starting over", "bucket", lc.bucket)
			continue
		}
		if err := lc.write(ctx, after); err != nil {
			if attempt == maxUpdateAttempts || !transient(ctx, err) {
				return res, err
			}
			lc.d.log.V(1).Info("writing the lifecycle configuration failed; starting over from the read", "bucket", lc.bucket, "error", err)
			if err := lc.d.wait(ctx, attempt); err != nil {
				return res, err
			}
			continue
		}
		written, err := lc.get(ctx)
		if err != nil {
			return res, err
		}
		own, others := missing(lc, after, written)
		if len(others) > 0 {
			lc.d.log.Info("rules of the lifecycle configuration that were read and written back are gone right after the write: another writer removed them, or wrote an older configuration", "bucket", lc.bucket, "rules", others)
			res.Vanished = append(res.Vanished, others...)
		}
		if len(own) == 0 {
			return res, nil
		}
		if attempt == maxUpdateAttempts {
			return res, fmt.Errorf("backupstore: expiry: the lifecycle configuration of bucket %q was overwritten after every one of %d attempts to update it", lc.bucket, attempt)
		}
	}
}

// missing returns the IDs of the rules of wrote that are not in read as
// written: this package's rules for lc.prefix (own), and the others.
func missing(lc *lifecycle, wrote, read []s3types.LifecycleRule) (own, others []string) {
	for _, w := range wrote {
		found := false
		for _, r := range read {
			if reflect.DeepEqual(w, r) {
				found = true
				break
			}
		}
		if found {
			continue
		}
		if lc.ownsForPrefix(w) {
			own = append(own, aws.ToString(w.ID))
		} else {
			others = append(others, aws.ToString(w.ID))
		}
	}
	return own, others
}

func clone(rules []s3types.LifecycleRule) []s3types.LifecycleRule {
	if rules == nil {
		return nil
	}
	return append([]s3types.LifecycleRule(nil), rules...)
}

// isEmpty reports whether nothing, not even a version or delete marker, is
// stored under prefix.
func (lc *lifecycle) isEmpty(ctx context.Context, prefix string) (bool, error) {
	var out *s3.ListObjectVersionsOutput
	err := lc.d.retry.do(ctx, lc.d.clock, transient, func() error {
		var err error
		out, err = lc.client.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(lc.bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(1)})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("backupstore: expiry: list prefix %q of bucket %q: %w", prefix, lc.bucket, err)
	}
	return len(out.Versions) == 0 && len(out.DeleteMarkers) == 0, nil
}
