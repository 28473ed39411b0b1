package main

import (
	"context"
	"encoding/json"
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// cluster is what the controller needs of the API server: reads from the
// manager's cache, writes that carry the resourceVersion of the object
// read, so that a decision made on a stale object fails with a conflict and
// is made again. The real one is in cluster.go, the scenario's in
// scenario.go.
type cluster interface {
	Entry(ctx context.Context, name string) (*api.BackupEntry, error)
	// GetEntry reads the entry from the API server, not from a cache.
	GetEntry(ctx context.Context, name string) (*api.BackupEntry, error)
	Entries(ctx context.Context) ([]*api.BackupEntry, error)
	Bucket(ctx context.Context, name string) (*api.BackupBucket, error)
	UpdateEntry(ctx context.Context, e *api.BackupEntry) (*api.BackupEntry, error)
	UpdateEntryStatus(ctx context.Context, e *api.BackupEntry) (*api.BackupEntry, error)
	UpdateBucket(ctx context.Context, b *api.BackupBucket) (*api.BackupBucket, error)
	UpdateBucketStatus(ctx context.Context, b *api.BackupBucket) (*api.BackupBucket, error)
}

// storeOpener opens the object store bucket of a BackupBucket; the caller
// closes it with the returned function.
type storeOpener func(ctx context.Context, b *api.BackupBucket) (*blob.Bucket, func(), error)

// markerKey is written under an entry's prefix when the entry is admitted:
// it makes the prefix exist before the cluster's first backup, so that
// backupstore.Quota counts the entry (the seed's "creation of directory
// specific to shoot in backup bucket"), and says whose prefix it is.
const markerKey = "backup-entry.json"

// eventRecorder records events about the entries and buckets:
// crt.Events(mgr.GetEventRecorder(name)) in a cluster.
type eventRecorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

// controller reconciles BackupEntries and BackupBuckets. Entries must be
// reconciled by one worker: backupstore.Quota admits two racing entries for
// the last place, and one worker serializes the admissions.
type controller struct {
	cluster cluster
	open    storeOpener
	events  eventRecorder
	clock   clock.WithTicker
	// grace is the deletion grace period: a deleted entry's prefix is
	// deleted grace after its deletion timestamp.
	grace time.Duration
	// dryRun reports what a deletion would remove, removes nothing and keeps
	// the finalizer.
	dryRun bool
}

func entryKey(name string) string  { return "entry/" + name }
func bucketKey(name string) string { return "bucket/" + name }

// reconcile reconciles the object behind key (entryKey, bucketKey) and
// returns when to look at it again (0: when it changes). An error is
// retried with backoff. The scenario calls it; a manager calls
// reconcileEntry and reconcileBucket through their controllers.
func (c *controller) reconcile(ctx context.Context, key string) (time.Duration, error) {
	kind, name, _ := strings.Cut(key, "/")
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues(kind, name))
	if kind == "bucket" {
		return c.reconcileBucket(ctx, name)
	}
	return c.reconcileEntry(ctx, name)
}

func (c *controller) reconcileEntry(ctx context.Context, name string) (time.Duration, error) {
	e, err := c.cluster.Entry(ctx, name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	e = e.DeepCopy()
	if e.DeletionTimestamp != nil {
		return c.finalizeEntry(ctx, e)
	}
	if !slices.Contains(e.Finalizers, api.Finalizer) {
		e.Finalizers = append(e.Finalizers, api.Finalizer)
		if e, err = c.cluster.UpdateEntry(ctx, e); err != nil {
			return 0, fmt.Errorf("add finalizer: %w", err)
		}
	}
	if e.Status.Prefix != "" {
		return 0, nil
	}
	return 0, c.admit(ctx, e)
}

// admit gives e a prefix in its bucket if the bucket has room, and records
// the outcome in the Admitted condition. A refused entry is looked at again
// when its bucket changes and has room (see refusedEntries).
func (c *controller) admit(ctx context.Context, e *api.BackupEntry) error {
	refuse := func(reason, msg string, err error) error {
		changed, werr := c.setEntryCondition(ctx, e, api.ConditionAdmitted, metav1.ConditionFalse, reason, msg)
		if changed {
			c.events.Event(e, corev1.EventTypeWarning, reason, msg)
			logr.FromContextOrDiscard(ctx).Info("not admitted", "reason", reason, "message", msg)
		}
		return errors.Join(err, werr)
	}
	b, err := c.cluster.Bucket(ctx, e.Spec.BucketName)
	if apierrors.IsNotFound(err) {
		return refuse("BucketNotFound", fmt.Sprintf("spec.bucketName %q: no such BackupBucket", e.Spec.BucketName), nil)
	}
	if err != nil {
		return err
	}
	if b.DeletionTimestamp != nil {
		return refuse("BucketDeleting", fmt.Sprintf("spec.bucketName %q: the BackupBucket is being deleted", b.Name), nil)
	}
	prefix, err := backupstore.EntryPrefix("", e.Name)
	if err != nil { // a Kubernetes name never contains "/", but check anyway
		return refuse("InvalidName", err.Error(), nil)
	}
	store, closeStore, err := c.open(ctx, b)
	if err != nil {
		return refuse("StoreError", err.Error(), err)
	}
	defer closeStore()
	n, err := backupstore.Quota{Limit: b.Spec.MaxEntries}.Admit(ctx, store, e.Name)
	if errors.Is(err, backupstore.ErrBucketFull) {
		return refuse("BucketFull", fmt.Sprintf("BackupBucket %q holds %d entries, spec.maxEntries is %d: no prefix given", b.Name, n, b.Spec.MaxEntries), nil)
	}
	if err != nil {
		return refuse("StoreError", err.Error(), err)
	}
	marker, _ := json.Marshal(map[string]string{"backupEntry": e.Name, "uid": string(e.UID), "shootUID": e.Spec.ShootUID})
	if err := store.WriteAll(ctx, prefix+markerKey, marker, nil); err != nil {
		return refuse("StoreError", fmt.Sprintf("write %s: %v", prefix+markerKey, err), err)
	}
	e.Status.Prefix = prefix
	msg := fmt.Sprintf("prefix %q in BackupBucket %q", prefix, b.Name)
	changed, err := c.setEntryCondition(ctx, e, api.ConditionAdmitted, metav1.ConditionTrue, "Admitted", msg)
	if err != nil {
		return err // admitted again, idempotently, on the retry
	}
	if changed {
		c.events.Event(e, corev1.EventTypeNormal, "Admitted", msg)
		logr.FromContextOrDiscard(ctx).Info("admitted", "prefix", prefix, "bucket", b.Name)
	}
	return nil
}

// finalizeEntry deletes a deleted entry's prefix once the grace period has
// passed (at once when forced), then removes the finalizer. Until the prefix
// is deleted the finalizer stays, whatever fails.
func (c *controller) finalizeEntry(ctx context.Context, e *api.BackupEntry) (time.Duration, error) {
	if !slices.Contains(e.Finalizers, api.Finalizer) {
		return 0, nil
	}
	log := logr.FromContextOrDiscard(ctx)
	now := c.clock.Now()
	keep, at, err := c.keepPrefix(e, now)
	if err != nil {
		return 0, err
	}
	if !keep {
		// The cache says delete now. Decide again on the API server's copy
		// (kubernetes' ttlafterfinished does the same), so that a cache that
		// lags behind a change (the force annotation removed) never deletes
		// data; the finalizer update below carries its resourceVersion.
		live, err := c.cluster.GetEntry(ctx, e.Name)
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if live.UID != e.UID || !slices.Contains(live.Finalizers, api.Finalizer) {
			return 0, nil // another entry of the same name, or done already
		}
		e = live
		if keep, at, err = c.keepPrefix(e, now); err != nil {
			return 0, err
		}
	}
	if keep {
		deleteAfter := metav1.NewTime(at)
		msg := fmt.Sprintf("prefix %q is deleted at %s (deletion grace period %s)", e.Status.Prefix, at.UTC().Format(time.RFC3339), retention.Format(c.grace))
		msg += c.installBackstop(ctx, e, at)
		e.Status.DeleteAfter = &deleteAfter
		changed, err := c.setEntryCondition(ctx, e, api.ConditionPrefixDeleted, metav1.ConditionFalse, "GracePeriod", msg)
		if err != nil {
			return 0, err
		}
		if changed {
			c.events.Event(e, corev1.EventTypeNormal, "GracePeriod", msg)
			log.Info("waiting for the deletion grace period", "deleteAfter", at.UTC())
		}
		return at.Sub(now), nil
	}

	fail := func(reason, msg string, err error) (time.Duration, error) {
		changed, werr := c.setEntryCondition(ctx, e, api.ConditionPrefixDeleted, metav1.ConditionFalse, reason, msg)
		if changed {
			c.events.Event(e, corev1.EventTypeWarning, reason, msg+"; the finalizer stays")
			log.Info("prefix not deleted; the finalizer stays", "reason", reason, "message", msg)
		}
		return 0, errors.Join(err, werr)
	}
	b, err := c.cluster.Bucket(ctx, e.Spec.BucketName)
	switch {
	case apierrors.IsNotFound(err) && e.Status.Prefix == "":
		return 0, c.removeEntryFinalizer(ctx, e, "never admitted; nothing to delete")
	case apierrors.IsNotFound(err):
		// Cannot happen while the bucket's finalizer waits for its entries.
		return fail("BucketNotFound", fmt.Sprintf("spec.bucketName %q: no such BackupBucket, prefix %q cannot be deleted", e.Spec.BucketName, e.Status.Prefix), nil)
	case err != nil:
		return 0, err
	}
	// Also for an entry without status.prefix: its marker may have been
	// written by an admission whose status update was lost.
	prefix, err := backupstore.EntryPrefix("", e.Name)
	if err != nil {
		return fail("InvalidName", err.Error(), nil)
	}
	store, closeStore, err := c.open(ctx, b)
	if err != nil {
		return fail("StoreError", err.Error(), err)
	}
	defer closeStore()
	dr, err := backupstore.DeletePrefix(ctx, store, prefix, &backupstore.DeleteOptions{DryRun: c.dryRun, Clock: c.clock})
	if re := retainedOnly(err); re != nil {
		// Object Lock keeps part of the data: no amount of retrying helps
		// before the retention ends. Say so, and come back then.
		msg := fmt.Sprintf("BackupBucket %q: %v", b.Name, re)
		changed, werr := c.setEntryCondition(ctx, e, api.ConditionPrefixDeleted, metav1.ConditionFalse, "Retained", msg)
		if changed {
			c.events.Event(e, corev1.EventTypeWarning, "Retained", msg+"; the finalizer stays")
			log.Info("prefix retained by object lock; the finalizer stays", "retryAt", re.RetryAt, "versions", len(re.Objects))
		}
		if werr != nil {
			return 0, werr
		}
		if re.RetryAt.IsZero() {
			return legalHoldRecheck, nil // only lifting the hold helps
		}
		return max(re.RetryAt.Sub(c.clock.Now()), time.Second), nil
	}
	if err != nil {
		return fail("StoreError", fmt.Sprintf("delete prefix %q from BackupBucket %q: %v", prefix, b.Name, err), err)
	}
	if c.dryRun {
		msg := fmt.Sprintf("dry run: would delete %d objects (%d bytes) under %q from BackupBucket %q", len(dr.Keys), dr.Bytes, prefix, b.Name)
		changed, err := c.setEntryCondition(ctx, e, api.ConditionPrefixDeleted, metav1.ConditionFalse, "DryRun", msg)
		if changed {
			c.events.Event(e, corev1.EventTypeNormal, "DryRun", msg)
			log.Info("dry run: would delete", "prefix", prefix, "keys", dr.Keys, "bytes", dr.Bytes)
		}
		return 0, err
	}
	// The backstop rule goes before the finalizer: left behind, it would
	// expire the data of a new entry of the same name.
	if _, err := backupstore.RemoveExpiry(ctx, store, prefix, nil); err != nil && !errors.Is(err, backupstore.ErrExpiryUnsupported) {
		return fail("StoreError", fmt.Sprintf("remove the lifecycle rule of prefix %q from BackupBucket %q: %v", prefix, b.Name, err), err)
	}
	msg := fmt.Sprintf("deleted %d objects (%d bytes) under %q from BackupBucket %q", dr.Deleted, dr.DeletedBytes, prefix, b.Name)
	c.events.Event(e, corev1.EventTypeNormal, "PrefixDeleted", msg)
	if err := c.removeEntryFinalizer(ctx, e, msg); err != nil {
		return 0, err // the deletion is repeated (finding nothing) next time
	}
	return 0, nil
}

// installBackstop asks the store to expire a deleted entry's prefix itself
// from at (S3 lifecycle rules: the first midnight UTC after it), so that the
// data does not outlive its grace period by more than a day or two even if
// this controller is gone by then. It returns a note for the condition, or
// "" where the store has no lifecycle API here or the rule could not be
// written (logged; the controller still deletes the prefix at at).
func (c *controller) installBackstop(ctx context.Context, e *api.BackupEntry, at time.Time) string {
	log := logr.FromContextOrDiscard(ctx)
	b, err := c.cluster.Bucket(ctx, e.Spec.BucketName)
	if err != nil {
		return ""
	}
	prefix, err := backupstore.EntryPrefix("", e.Name)
	if err != nil {
		return ""
	}
	store, closeStore, err := c.open(ctx, b)
	if err != nil {
		log.Info("backstop lifecycle rule not installed", "error", err.Error())
		return ""
	}
	defer closeStore()
	res, err := backupstore.ExpirePrefix(ctx, store, prefix, at, &backupstore.ExpiryOptions{DryRun: c.dryRun, Clock: c.clock})
	switch {
	case errors.Is(err, backupstore.ErrExpiryUnsupported):
		return ""
	case err != nil:
		log.Info("backstop lifecycle rule not installed", "error", err.Error())
		return ""
	case len(res.Rules) == 0:
		return ""
	}
	verb := "expires"
	if c.dryRun {
		verb = "would expire (dry run: not installed)"
	}
	return fmt.Sprintf("; backstop: the store's lifecycle rule %q %s it from %s even without this controller", res.Rules[0].ID, verb, res.Rules[0].Date.Format(time.RFC3339))
}

// legalHoldRecheck is how often a prefix kept only by legal holds, which
// have no end, is tried again.
const legalHoldRecheck = time.Hour

// retainedOnly returns the *RetainedError of a deletion that failed only
// because the store keeps some versions under Object Lock; nil otherwise
// (any other failure is a StoreError, retried with backoff).
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

// keepPrefix decides, from the entry and the time alone, whether a deleted
// entry's prefix must be kept now, and until when. Gardener's
// deletionGracePeriod is a TTL from the deletion timestamp; the force
// annotation is retention's Force. An entry that never got a prefix has no
// backups to keep.
func (c *controller) keepPrefix(e *api.BackupEntry, now time.Time) (bool, time.Time, error) {
	forced := e.Annotations[api.ForceDeletionAnnotation] == "true"
	var res retention.Result
	// One entry judged alone: the guard, which keeps the newest item of a
	// group, would keep it forever.
	alone := retention.Options{AllowDeleteNewest: true}
	if err := alone.Evaluate(retention.TTL{After: c.grace}, now, []retention.Item{{
		ID: e.Name, Time: e.DeletionTimestamp.Time, Force: forced || e.Status.Prefix == "",
	}}, &res); err != nil {
		return false, time.Time{}, err
	}
	d := res.Decisions[0]
	return d.Keep, d.DeletableAt, nil
}

// removeEntryFinalizer updates e, read with the resourceVersion the decision
// was made on: if the entry changed since (the force annotation removed, say)
// the update fails with a conflict and the entry is decided again.
func (c *controller) removeEntryFinalizer(ctx context.Context, e *api.BackupEntry, why string) error {
	e.Finalizers = slices.DeleteFunc(e.Finalizers, func(f string) bool { return f == api.Finalizer })
	if _, err := c.cluster.UpdateEntry(ctx, e); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	logr.FromContextOrDiscard(ctx).Info("finalizer removed", "why", why)
	return nil
}

// setEntryCondition sets a condition and writes the status if it changed.
// It reports whether the condition's status or reason changed, the moments
// worth an event: a deletion that keeps failing with a new message each
// time (a store's request ID) updates the condition, not the event stream.
// A failed write (a conflict with a newer entry) is returned for a retry,
// since the controller's own status writes do not requeue the entry.
func (c *controller) setEntryCondition(ctx context.Context, e *api.BackupEntry, typ string, status metav1.ConditionStatus, reason, msg string) (bool, error) {
	before := e.Status.DeepCopy()
	prev := meta.FindStatusCondition(before.Conditions, typ)
	transition := prev == nil || prev.Status != status || prev.Reason != reason
	meta.SetStatusCondition(&e.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: e.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now()),
	})
	if statusEqual(before, &e.Status) {
		return false, nil
	}
	updated, err := c.cluster.UpdateEntryStatus(ctx, e)
	if err != nil {
		e.Status = *before
		return false, fmt.Errorf("update status (%s %s): %w", typ, reason, err)
	}
	*e = *updated
	return transition, nil
}

func statusEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// reconcileBucket keeps the bucket's finalizer while entries name it and
// counts them in its status; a change of the count gives refused entries
// another chance (refusedEntries).
func (c *controller) reconcileBucket(ctx context.Context, name string) (time.Duration, error) {
	b, err := c.cluster.Bucket(ctx, name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	b = b.DeepCopy()
	all, err := c.cluster.Entries(ctx)
	if err != nil {
		return 0, err
	}
	var names []string
	admitted := 0
	for _, e := range all {
		if e.Spec.BucketName != name {
			continue
		}
		names = append(names, e.Name)
		if e.Status.Prefix != "" {
			admitted++
		}
	}
	slices.Sort(names)

	if b.DeletionTimestamp != nil {
		if !slices.Contains(b.Finalizers, api.Finalizer) {
			return 0, nil
		}
		if len(names) == 0 {
			b.Finalizers = slices.DeleteFunc(b.Finalizers, func(f string) bool { return f == api.Finalizer })
			if _, err := c.cluster.UpdateBucket(ctx, b); err != nil && !apierrors.IsNotFound(err) {
				return 0, fmt.Errorf("remove finalizer: %w", err)
			}
			logr.FromContextOrDiscard(ctx).Info("finalizer removed", "why", "no BackupEntry names the bucket")
			return 0, nil
		}
	} else if !slices.Contains(b.Finalizers, api.Finalizer) {
		b.Finalizers = append(b.Finalizers, api.Finalizer)
		if b, err = c.cluster.UpdateBucket(ctx, b); err != nil {
			return 0, fmt.Errorf("add finalizer: %w", err)
		}
	}

	before := b.Status.DeepCopy()
	b.Status.Entries, b.Status.Admitted = len(names), admitted
	inUse := metav1.Condition{Type: api.ConditionInUse, Status: metav1.ConditionFalse, Reason: "NoEntries",
		Message: "no BackupEntry names the bucket", ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())}
	if len(names) > 0 {
		inUse.Status, inUse.Reason = metav1.ConditionTrue, "EntriesExist"
		inUse.Message = fmt.Sprintf("%d BackupEntries name the bucket: %s", len(names), strings.Join(names, ", "))
		if b.DeletionTimestamp != nil {
			inUse.Reason = "DeletionBlocked"
		}
	}
	meta.SetStatusCondition(&b.Status.Conditions, inUse)
	if !statusEqual(before, &b.Status) {
		if b.DeletionTimestamp != nil {
			c.events.Event(b, corev1.EventTypeWarning, "BucketInUse", "deletion waits: "+inUse.Message)
		}
		if _, err := c.cluster.UpdateBucketStatus(ctx, b); err != nil {
			return 0, fmt.Errorf("update status: %w", err)
		}
	}
	return 0, nil
}

// refusedEntries names the entries of all that wait for a place in bucket
// b (no prefix, not deleted), if b has room now: they are reconciled again
// when b changes, which it does when an entry frees a place (its status
// counts them).
func refusedEntries(b *api.BackupBucket, all []*api.BackupEntry) []string {
	if b.DeletionTimestamp != nil || (b.Spec.MaxEntries > 0 && b.Status.Admitted >= b.Spec.MaxEntries) {
		return nil
	}
	var names []string
	for _, e := range all {
		if e.Spec.BucketName == b.Name && e.Status.Prefix == "" && e.DeletionTimestamp == nil {
			names = append(names, e.Name)
		}
	}
	return names
}
