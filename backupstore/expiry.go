package backupstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"gocloud.dev/blob"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// ErrExpiryUnsupported is returned by ExpirePrefix, RemoveExpiry and
// PruneExpiry for a bucket whose lifecycle API this package does not
// reach: every store but S3 (GCS and Azure have lifecycle management, but
// their emulators here have none to test against, so no code path for
// them is shipped).
var ErrExpiryUnsupported = errclass.Terminal("backupstore: server-side expiry is not supported for this store")

// ErrTooManyRules is returned when adding this package's rules would take
// the bucket's lifecycle configuration past the store's limit (S3: 1,000
// rules). Nothing is written.
var ErrTooManyRules = errclass.Terminal("backupstore: the bucket's lifecycle configuration would exceed the store's rule limit")

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
	versioned, err := lc.Versioned(ctx)
	if err != nil {
		return nil, err
	}
	want := lc.NewRules(ruleID("expire", lc.Prefix()), ruleID("markers", lc.Prefix()), lc.Prefix(), midnightAtOrAfter(at), versioned)
	res, err := lc.update(ctx, func(rules []driver.Rule) []driver.Rule {
		// Our rules take the place of the first of them, so that a call
		// that changes nothing writes nothing.
		out := make([]driver.Rule, 0, len(rules)+len(want))
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
	var removed []driver.Rule
	res, err := lc.update(ctx, func(rules []driver.Rule) []driver.Rule {
		removed = nil
		var out []driver.Rule
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
	var removed []driver.Rule
	res, err := lc.update(ctx, func(rules []driver.Rule) []driver.Rule {
		removed = nil
		// A prefix is due when no rule of ours for it has a date ahead.
		due := map[string]bool{}
		for _, r := range rules {
			if lc.owns(r) {
				p := r.Prefix()
				if _, ok := due[p]; !ok {
					due[p] = true
				}
				if r.Date().After(lc.d.clock.Now()) {
					due[p] = false
				}
			}
		}
		var out []driver.Rule
		for _, r := range rules {
			p := r.Prefix()
			if !lc.owns(r) || !strings.HasPrefix(p, lc.Prefix()) || !due[p] {
				out = append(out, r)
				continue
			}
			isEmpty, seen := empty[p]
			if !seen {
				var err error
				if isEmpty, err = lc.IsEmpty(ctx, p); err != nil {
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

// summarize describes rules for ExpiryResult.
func summarize(rules []driver.Rule) []ExpiryRule {
	var out []ExpiryRule
	for _, r := range rules {
		out = append(out, ExpiryRule{ID: r.ID(), Prefix: r.Prefix(), Date: r.Date(),
			NoncurrentDays: r.NoncurrentDays(), ExpiredDeleteMarkers: r.ExpiredDeleteMarkers()})
	}
	return out
}

// lifecycle is a bucket's lifecycle configuration (its store's, through
// its provider), seen through one prefix, with the deletion whose prefix
// checks and retries it uses.
type lifecycle struct {
	driver.Lifecycle
	opts *ExpiryOptions
	d    *deletion // for the prefix checks and retries
	err  error     // set by a modify function that failed
}

func openLifecycle(ctx context.Context, b *blob.Bucket, prefix string, opts *ExpiryOptions) (*lifecycle, error) {
	if opts == nil {
		opts = &ExpiryOptions{}
	}
	if err := CheckPrefix(prefix, opts.PrefixRules); err != nil {
		return nil, err
	}
	p, err := storeOf(b)
	if err != nil {
		return nil, err
	}
	var rm driver.Remover
	if p != nil {
		rm = p.Remover(b, driver.RemoverOptions{})
	}
	ex, ok := rm.(driver.Expirer)
	if !ok {
		return nil, fmt.Errorf("%w (only S3 buckets have one here)", ErrExpiryUnsupported)
	}
	d := &deletion{bucket: b, prefix: prefix, rm: rm, opts: &DeleteOptions{PrefixRules: opts.PrefixRules},
		retry: opts.Retry.withDefaults(), clock: opts.Clock, log: logr.FromContextOrDiscard(ctx).WithValues("prefix", prefix)}
	if d.clock == nil {
		d.clock = clock.RealClock{}
	}
	l, err := ex.Lifecycle(ctx, d)
	if err != nil {
		return nil, err
	}
	return &lifecycle{Lifecycle: l, opts: opts, d: d}, nil
}

// owns reports whether this package owns r.
func (lc *lifecycle) owns(r driver.Rule) bool {
	return strings.HasPrefix(r.ID(), ruleIDPrefix)
}

// ownsForPrefix reports whether r is one of this package's rules for
// lc.Prefix().
func (lc *lifecycle) ownsForPrefix(r driver.Rule) bool {
	id := r.ID()
	return id == ruleID("expire", lc.Prefix()) || id == ruleID("markers", lc.Prefix())
}

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
func (lc *lifecycle) update(ctx context.Context, modify func([]driver.Rule) []driver.Rule) (*ExpiryResult, error) {
	res := &ExpiryResult{}
	for attempt := 1; ; attempt++ {
		before, err := lc.Rules(ctx)
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
		if len(after) > lc.MaxRules() {
			return res, fmt.Errorf("%w: bucket %q has %d rules, and %d are wanted; the limit is %d", ErrTooManyRules, lc.Bucket(), len(before), len(after), lc.MaxRules())
		}
		res.Changed = true
		if lc.opts.DryRun {
			return res, nil
		}
		again, err := lc.Rules(ctx)
		if err != nil {
			return res, err
		}
		if !reflect.DeepEqual(before, again) {
			if attempt == maxUpdateAttempts {
				return res, fmt.Errorf("backupstore: expiry: the lifecycle configuration of bucket %q changed under every one of %d attempts to update it", lc.Bucket(), attempt)
			}
			lc.d.log.V(1).Info("lifecycle configuration changed while updating it; starting over", "bucket", lc.Bucket())
			continue
		}
		if err := lc.Write(ctx, after); err != nil {
			if attempt == maxUpdateAttempts || !transient(ctx, err) {
				return res, err
			}
			lc.d.log.V(1).Info("writing the lifecycle configuration failed; starting over from the read", "bucket", lc.Bucket(), "error", err)
			if err := lc.d.wait(ctx, attempt); err != nil {
				return res, err
			}
			continue
		}
		written, err := lc.Rules(ctx)
		if err != nil {
			return res, err
		}
		own, others := missing(lc, after, written)
		if len(others) > 0 {
			lc.d.log.Info("rules of the lifecycle configuration that were read and written back are gone right after the write: another writer removed them, or wrote an older configuration", "bucket", lc.Bucket(), "rules", others)
			res.Vanished = append(res.Vanished, others...)
		}
		if len(own) == 0 {
			return res, nil
		}
		if attempt == maxUpdateAttempts {
			return res, fmt.Errorf("backupstore: expiry: the lifecycle configuration of bucket %q was overwritten after every one of %d attempts to update it", lc.Bucket(), attempt)
		}
	}
}

// missing returns the IDs of the rules of wrote that are not in read as
// written: this package's rules for lc.Prefix() (own), and the others.
func missing(lc *lifecycle, wrote, read []driver.Rule) (own, others []string) {
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
			own = append(own, w.ID())
		} else {
			others = append(others, w.ID())
		}
	}
	return own, others
}

func clone(rules []driver.Rule) []driver.Rule {
	if rules == nil {
		return nil
	}
	return append([]driver.Rule(nil), rules...)
}
