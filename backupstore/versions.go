package backupstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
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
var ErrRetained = driver.ErrRetained

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

// Terminal reports false: the error is retried, or judged by the error
// it wraps (crt.Terminal).
func (*Retention) Terminal() bool { return false }

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

// Terminal reports false: the error is retried, or judged by the error
// it wraps (crt.Terminal).
func (*RetainedError) Terminal() bool { return false }

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

// listVersions pages through every version under the prefix and hands
// batches of targets to emit. The keys handed on are the store's keys less
// the bucket's own prefix (of a blob.PrefixedBucket); gocloud's escaping
// of unusual characters (which the prefix itself never has: CheckPrefix)
// is not undone in them.
func (d *deletion) listVersions(ctx context.Context, emit func([]driver.Target) error) error {
	vl := d.rm.(driver.VersionLister)
	if err := d.CheckEffectivePrefix(); err != nil {
		return err
	}
	listed, _ := d.rm.ListedPrefix()
	bucketPrefix := strings.TrimSuffix(listed, d.prefix)
	n := d.rm.BatchSize()
	batch := make([]driver.Target, 0, n)
	var token any
	for {
		var page []driver.Target
		var next any
		err := d.Retry(ctx, func() error {
			var err error
			page, next, err = vl.VersionsPage(ctx, listed, token)
			return err
		})
		if err != nil {
			return fmt.Errorf("list versions: %w", err)
		}
		// Stores list versions and markers apart (S3) or oldest first
		// (GCS): list them by key, the latest version of a key first.
		slices.SortStableFunc(page, func(a, b driver.Target) int {
			if c := strings.Compare(a.Raw, b.Raw); c != 0 {
				return c
			}
			switch {
			case a.Latest && !b.Latest:
				return -1
			case b.Latest && !a.Latest:
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
			t.Key = t.Raw
			if strings.HasPrefix(t.Raw, bucketPrefix) {
				t.Key = t.Raw[len(bucketPrefix):]
			}
			if anyFailed && d.isFailed(t.ID()) || t.Key == d.spare && d.spare != "" {
				continue
			}
			listedN++
			bytes += t.Size
			batch = append(batch, t)
			if len(batch) == n {
				if err := emit(batch); err != nil {
					return err
				}
				batch = make([]driver.Target, 0, n)
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
