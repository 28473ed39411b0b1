package collect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
)

// dataResult is what deleteData did: kept is set when the data could not
// (or must not) all be deleted, with the reason recorded.
type dataResult struct {
	msg  string
	keys []string // dry run: the keys that would be deleted
	kept *Outcome
}

// deleteData deletes every key under o's data prefix, and nothing else:
// it refuses when the prefix nests with another backup's in the same
// bucket (of any namespace, listed once by near), when the credentials cannot be read, and reports Object
// Lock retention with the time it ends. It is the one path to the data,
// for the pass and for Finalize.
//
// Every attempt that keeps the backup records a Warning event (the pass
// retries after RetryAfter); onChange records it only when the condition
// changes (Finalize's retries back off from milliseconds).
func (c *Collector[T]) deleteData(ctx context.Context, o T, near *neighbours[T], onChange bool) dataResult {
	kept := func(reason, msg string) dataResult { return *c.kept(ctx, o, onChange, reason, msg) }
	loc, err := c.location(ctx, o)
	if err != nil {
		return kept(c.cfg.Reasons.InvalidLocation, err.Error())
	}
	if loc == (Location{}) {
		return dataResult{msg: "no data to delete"}
	}
	where := loc.Where()
	if why := nestedWith(ctx, c, o, loc, near); why != "" {
		c.dropBackstopOf(ctx, o, loc)
		return kept(c.cfg.Reasons.NestedPrefix, why)
	}
	bucket, release, err := c.open(ctx, o, loc)
	if err != nil {
		var oe *openError
		errors.As(err, &oe)
		msg := err.Error()
		switch oe.reason {
		case c.cfg.Reasons.SecretNotFound:
			msg += ": the data under " + where + " was not deleted and the backup is kept"
		case c.cfg.Reasons.InvalidCredentials:
			msg += ": the data under " + where + " was not deleted"
		}
		return kept(oe.reason, msg)
	}
	defer release()
	marker, end := c.proveData(ctx, o, bucket, loc, onChange)
	if end != nil {
		return *end
	}
	opts := &backupstore.DeleteOptions{DryRun: c.cfg.DryRun.Enabled}
	if marker != nil {
		// The marker goes last: a deletion cut short, by an error or by
		// the process ending, leaves the proof of whose the rest is.
		opts.Last = loc.Prefix + loc.Marker
	}
	res, err := backupstore.DeletePrefix(ctx, bucket, loc.Prefix, opts)
	if err != nil && marker != nil && !c.cfg.DryRun.Enabled {
		// Some data stays: so must the record of whose it is, for the
		// retry (the marker can have gone with the last objects, when one
		// written meanwhile could not be deleted).
		if _, found, rerr := backupstore.MarkerOwner(ctx, bucket, loc.Prefix+loc.Marker); rerr == nil && !found {
			if werr := backupstore.WriteMarker(ctx, bucket, loc.Prefix+loc.Marker, loc.Owner, marker); werr != nil {
				err = errors.Join(err, fmt.Errorf("write the marker back: %w", werr))
			}
		}
	}
	if re := retainedOnly(err); re != nil {
		// Nothing helps before the retention ends: keep the backup, say
		// until when, and come back then.
		d := kept(c.cfg.Reasons.Retained, fmt.Sprintf("deleted %d objects under %s; %v", res.Deleted, where, re))
		d.kept.RetryAt = re.RetryAt
		if re.RetryAt.IsZero() { // only legal holds, which have no end
			d.kept.RetryAt = c.cfg.Clock.Now().Add(max(c.cfg.RetryAfter, time.Hour))
		}
		return d
	}
	if err != nil {
		// Never delete the resource while data may be left: it is the only
		// record of where the data is.
		return kept(c.cfg.Reasons.DeletionFailed, fmt.Sprintf("deleted %d objects under %s, then: %v", res.Deleted, where, err))
	}
	if c.fin.Backstop && !c.cfg.DryRun.Enabled {
		// The backstop rule goes before the finalizer: left behind, it
		// would expire the data of a new backup at this prefix.
		if _, err := backupstore.RemoveExpiry(ctx, bucket, loc.Prefix, nil); err != nil && !errors.Is(err, backupstore.ErrExpiryUnsupported) {
			return kept(c.cfg.Reasons.DeletionFailed, fmt.Sprintf("deleted %d objects under %s, then: remove its lifecycle rule: %v", res.Deleted, where, err))
		}
	}
	if c.cfg.DryRun.Enabled {
		return dataResult{msg: fmt.Sprintf("would delete %d objects (%d bytes) under %s", len(res.Keys), res.Bytes, where), keys: res.Keys}
	}
	return dataResult{msg: fmt.Sprintf("deleted %d objects (%d bytes) under %s", res.Deleted, res.DeletedBytes, where)}
}

// proveData checks, before a deletion, that the bucket of loc is there
// (with BucketMayBeMissing: a missing one holds no data) and, with an
// Owner, that the marker under the prefix names it. It returns the
// marker's content (nil without an Owner), or the result that ends the
// deletion: no data, or the backup kept.
func (c *Collector[T]) proveData(ctx context.Context, o T, bucket *blob.Bucket, loc Location, onChange bool) ([]byte, *dataResult) {
	where := loc.Where()
	if loc.BucketMayBeMissing {
		ok, err := bucket.IsAccessible(ctx)
		if err != nil {
			return nil, c.kept(ctx, o, onChange, c.cfg.Reasons.DeletionFailed, fmt.Sprintf("is the bucket of %s there: %v", where, err))
		}
		if !ok {
			return nil, &dataResult{msg: fmt.Sprintf("no data to delete: the bucket of %s does not exist", where)}
		}
	}
	if loc.Owner != "" {
		why, content, err := owned(ctx, bucket, loc)
		switch {
		case err != nil:
			return nil, c.kept(ctx, o, onChange, c.cfg.Reasons.DeletionFailed, fmt.Sprintf("read the marker of %s: %v", where, err))
		case why != "" && loc.NoDataUnlessOwner:
			c.dropBackstop(ctx, bucket, loc)
			return nil, &dataResult{msg: fmt.Sprintf("no data to delete: %s, and the prefix was never proven this backup's", why)}
		case why != "":
			c.dropBackstop(ctx, bucket, loc)
			return nil, c.kept(ctx, o, onChange, c.cfg.Reasons.NotOwner, fmt.Sprintf("%s: the data is not proven to be this backup's (UID %s), and nothing was deleted", why, loc.Owner))
		case content == nil:
			return nil, &dataResult{msg: fmt.Sprintf("no data to delete: nothing under %s", where)}
		}
		return content, nil
	}
	return nil, nil
}

// dropBackstopOf removes the backstop rule of o's data, if the Collector
// sets one and the bucket can be opened: the data is kept, so must not
// expire by the store's rule.
func (c *Collector[T]) dropBackstopOf(ctx context.Context, o T, loc Location) {
	if !c.fin.Backstop || c.cfg.DryRun.Enabled {
		return
	}
	if bucket, release, err := c.open(ctx, o, loc); err == nil {
		c.dropBackstop(ctx, bucket, loc)
		release()
	}
}

// kept keeps o for reason (see keepAs) and returns the result that says so.
func (c *Collector[T]) kept(ctx context.Context, o T, onChange bool, reason, msg string) *dataResult {
	out := c.keepAs(ctx, o, reason, msg, onChange)
	return &dataResult{kept: &out}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (c *Collector[T]) location(ctx context.Context, o T) (Location, error) {
	loc, err := c.cfg.Location(ctx, o)
	if err != nil {
		return Location{}, fmt.Errorf("backup %s/%s: location: %w", o.GetNamespace(), o.GetName(), err)
	}
	if loc == (Location{}) {
		return loc, nil
	}
	if loc.URL == "" {
		return Location{}, fmt.Errorf("backup %s/%s: location: empty bucket URL", o.GetNamespace(), o.GetName())
	}
	if err := backupstore.CheckPrefix(loc.Prefix, backupstore.PrefixRules{}); err != nil {
		return Location{}, fmt.Errorf("backup %s/%s: location: %w", o.GetNamespace(), o.GetName(), err)
	}
	if loc.Owner != "" && (loc.Marker == "" || strings.Contains(loc.Marker, backupstore.Separator)) {
		return Location{}, fmt.Errorf("backup %s/%s: location: Owner %q with Marker %q: the marker must be one key under the prefix", o.GetNamespace(), o.GetName(), loc.Owner, loc.Marker)
	}
	return loc, nil
}

// dropBackstop takes back a backstop lifecycle rule (Finalizer.Backstop)
// installed for loc's prefix during the grace period, when the data turns
// out not to be the backup's alone: the store must not delete it either.
func (c *Collector[T]) dropBackstop(ctx context.Context, b *blob.Bucket, loc Location) {
	if !c.fin.Backstop || c.cfg.DryRun.Enabled {
		return
	}
	if _, err := backupstore.RemoveExpiry(ctx, b, loc.Prefix, nil); err != nil && !errors.Is(err, backupstore.ErrExpiryUnsupported) {
		logr.FromContextOrDiscard(ctx).Info("backstop lifecycle rule not removed", "prefix", loc.Prefix, "error", err.Error())
	}
}

// owned says why the data under loc.Prefix is not proven loc.Owner's
// ("" when it is, or when there is none), and returns the marker's
// content when it names loc.Owner (nil for an empty prefix).
func owned(ctx context.Context, b *blob.Bucket, loc Location) (string, []byte, error) {
	key := loc.Prefix + loc.Marker
	owner, found, err := backupstore.MarkerOwner(ctx, b, key)
	switch {
	case err != nil:
		return "", nil, err
	case found && owner == loc.Owner:
		content, err := b.ReadAll(ctx, key)
		if content == nil {
			content = []byte{}
		}
		return "", content, err
	case found && owner == "":
		return fmt.Sprintf("the marker %s names no owner", key), nil, nil
	case found:
		return fmt.Sprintf("the marker %s names another owner (UID %s)", key, owner), nil, nil
	}
	empty, err := backupstore.Empty(ctx, b, loc.Prefix)
	if err != nil || empty {
		return "", nil, err
	}
	return fmt.Sprintf("%s holds objects and no marker %s", loc.Prefix, loc.Marker), nil, nil
}

// neighbours lists, once, the backups of every namespace that the nesting
// guard compares a deletion with: a prefix is in a bucket, and a bucket
// is shared across namespaces (two teams' "db" in one pool bucket).
type neighbours[T Object] struct {
	list func(ctx context.Context) ([]T, error)
	done bool
	all  []T
	err  error
}

func (c *Collector[T]) neighbours() *neighbours[T] {
	return &neighbours[T]{list: func(ctx context.Context) ([]T, error) { return c.cfg.Objects.List(ctx, "") }}
}

func (n *neighbours[T]) get(ctx context.Context) ([]T, error) {
	if !n.done {
		n.all, n.err = n.list(ctx)
		n.done = n.err == nil
	}
	return n.all, n.err
}

// nestedWith returns why o's data at loc must not be deleted for the sake
// of another backup's, "" if nothing stands in the way: a backup of any
// namespace, other than o, whose data lies in the same bucket
// (backupstore.SameBucket: one bucket spelled with other options, region or
// credentials is one bucket) under o's prefix, or under which o's lies; or
// a backup whose location cannot be read, since its data may be anywhere.
// Backups being deleted count: their data is still there.
func nestedWith[T Object](ctx context.Context, c *Collector[T], o T, loc Location, near *neighbours[T]) string {
	at, err := backupstore.ParseURL(loc.URL)
	if err != nil {
		return fmt.Sprintf("bucket URL %q: %v", loc.URL, err)
	}
	all, err := near.get(ctx)
	if err != nil {
		return fmt.Sprintf("list the backups of every namespace, to see that no other's data is under %s: %v; nothing was deleted", loc.Where(), err)
	}
	for _, x := range all {
		if x.GetUID() == o.GetUID() {
			continue
		}
		l, err := c.cfg.Location(ctx, x)
		if err != nil {
			return fmt.Sprintf("the location of backup %s cannot be read (%v): its data may be under %s; nothing was deleted", key(x), err, loc.Where())
		}
		if l == (Location{}) {
			continue
		}
		other, err := backupstore.ParseURL(l.URL)
		if err != nil {
			return fmt.Sprintf("backup %s names bucket URL %q (%v): its data may be under %s; nothing was deleted", key(x), l.URL, err, loc.Where())
		}
		if backupstore.Overlap(at, loc.Prefix, other, l.Prefix) {
			return fmt.Sprintf("the data of backup %s is under %s, which nests with %s in bucket %s: deleting %s would delete some of its data; nothing was deleted, move one of them",
				key(x), l.Where(), loc.Where(), at.ID, loc.Where())
		}
	}
	return ""
}

// retainedOnly returns the *RetainedError of a deletion that failed only
// because the store keeps some versions under Object Lock; nil otherwise.
func retainedOnly(err error) *backupstore.RetainedError {
	var de *backupstore.DeleteError
	if !errors.As(err, &de) || de.Err != nil {
		return nil
	}
	re := de.Retained()
	if re == nil || len(re.Objects) != len(de.Failed) {
		return nil
	}
	return re
}

// keep records why a deletable backup is kept: a Warning event and the
// condition False with the reason (not for c.cfg.Reasons.InvalidPolicy, which is
// not about the data). A dry run only reports it.
func (c *Collector[T]) keep(ctx context.Context, o T, reason, msg string) Outcome {
	return c.keepAs(ctx, o, reason, msg, false)
}

func (c *Collector[T]) keepAs(ctx context.Context, o T, reason, msg string, onChange bool) Outcome {
	log := logr.FromContextOrDiscard(ctx).WithValues("backup", o.GetName())
	out := Outcome{Name: o.GetName(), Reason: reason, Message: msg}
	log.Info("backup kept", "reason", reason, "message", msg, "dryRun", c.cfg.DryRun.Enabled)
	if c.cfg.DryRun.Enabled && !c.cfg.DryRun.Report {
		return out
	}
	if !onChange || c.lacks(o, reason, "") {
		c.cfg.Recorder.Event(o, corev1.EventTypeWarning, reason, msg)
	}
	if reason != c.cfg.Reasons.InvalidPolicy {
		c.setCondition(ctx, o, reason, msg)
	}
	return out
}

// setCondition sets the condition False with reason on o, if it changed.
// A conflict or a gone backup is left to the next pass.
func (c *Collector[T]) setCondition(ctx context.Context, o T, reason, msg string) bool {
	if _, ok := any(o).(ConditionSetter); !ok {
		return false
	}
	o = o.DeepCopyObject().(T)
	if !putCondition(o, metav1.Condition{
		Type: c.cfg.ConditionType, Status: metav1.ConditionFalse, Reason: reason, Message: msg,
		ObservedGeneration: o.GetGeneration(), LastTransitionTime: metav1.NewTime(c.cfg.Clock.Now()),
	}) {
		return false
	}
	if err := c.cfg.Objects.UpdateStatus(ctx, o); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		logr.FromContextOrDiscard(ctx).Error(err, "update status", "backup", o.GetName())
	}
	return true
}

// putCondition sets cond on o, a ConditionSetter (as
// meta.SetStatusCondition does), and reports whether it changed.
func putCondition(o Object, cond metav1.Condition) bool {
	s := o.(ConditionSetter)
	conds := slices.Clone(s.GetConditions())
	if !meta.SetStatusCondition(&conds, cond) {
		return false
	}
	s.SetConditions(conds)
	return true
}

// openError is why a backup's bucket could not be opened, with the reason
// for its condition.
type openError struct {
	reason string
	err    error
}

func (e *openError) Error() string { return e.err.Error() }
func (e *openError) Unwrap() error { return e.err }

// open opens the bucket of loc, o's location, with the credentials of its
// Secret. The error is an *openError.
func (c *Collector[T]) open(ctx context.Context, o T, loc Location) (*blob.Bucket, func() error, error) {
	fail := func(reason, format string, args ...any) (*blob.Bucket, func() error, error) {
		return nil, nil, &openError{reason: reason, err: fmt.Errorf(format, args...)}
	}
	creds, err := c.Credentials(ctx, o, loc)
	if err != nil {
		return nil, nil, err
	}
	bucket, release, err := c.cfg.Open(ctx, loc.URL, creds)
	if err != nil {
		return fail(c.cfg.Reasons.DeletionFailed, "open %s: %w", loc.URL, err)
	}
	return bucket, release, nil
}

// Credentials reads the credentials of loc's Secret (nil for a location
// without one), for o: the Secret's namespace defaults to o's. Its errors
// carry the reason the collector reports them with.
func (c *Collector[T]) Credentials(ctx context.Context, o T, loc Location) (*backupstore.Credentials, error) {
	fail := func(reason, format string, args ...any) (*backupstore.Credentials, error) {
		return nil, &openError{reason: reason, err: fmt.Errorf(format, args...)}
	}
	scheme, err := backupstore.Scheme(loc.URL)
	if err != nil {
		return fail(c.cfg.Reasons.InvalidLocation, "bucket URL %q: %w", loc.URL, err)
	}
	if loc.Secret == "" {
		return nil, nil
	}
	field := cmpOr(loc.SecretField, "credentials Secret")
	creds, err := backupstore.LoadCredentials(ctx, c.cfg.Secrets, cmpOr(loc.SecretNamespace, o.GetNamespace()), loc.Secret, scheme)
	switch {
	case errors.Is(err, backupstore.ErrSecretNotFound):
		return fail(c.cfg.Reasons.SecretNotFound, "%s %q not found", field, loc.Secret)
	case errors.Is(err, backupstore.ErrSecretKeyMissing):
		return fail(c.cfg.Reasons.InvalidCredentials, "%w", err)
	case err != nil:
		return fail(c.cfg.Reasons.DeletionFailed, "read %s %q: %w", field, loc.Secret, err)
	}
	return creds, nil
}

// OpenBucket opens the bucket where o's data lives (Location), with the
// credentials of its Secret, for a caller that writes there (a marker when
// a backup is admitted); it returns the bucket, its location and the
// function that releases it. A backup without data (the zero Location) is
// an error.
func (c *Collector[T]) OpenBucket(ctx context.Context, o T) (*blob.Bucket, Location, func() error, error) {
	loc, err := c.location(ctx, o)
	if err != nil {
		return nil, loc, nil, err
	}
	if loc == (Location{}) {
		return nil, loc, nil, fmt.Errorf("collect: backup %s has no data location", key(o))
	}
	b, release, err := c.open(ctx, o, loc)
	return b, loc, release, err
}

// OpenLocation opens the bucket of loc, with the credentials of its Secret
// and the Collector's Open, for data of o's that is not at o's Location
// (the legacy bucket a migration copies from); it returns the bucket and
// the function that releases it. A missing Secret or key is an error that
// names loc.SecretField.
func (c *Collector[T]) OpenLocation(ctx context.Context, o T, loc Location) (*blob.Bucket, func() error, error) {
	return c.open(ctx, o, loc)
}
