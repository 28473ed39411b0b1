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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
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
	events  eventRecorder
	clock   clock.WithTicker
	// entries deletes a deleted entry's prefix (entryConfig).
	entries *collect.Collector[*api.BackupEntry]
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
		_, after, err := c.entries.Finalize(ctx, e)
		return after, err
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
	store, _, closeStore, err := c.entries.OpenBucket(ctx, e)
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

// entryConfig is how the collector deletes a deleted entry's prefix
// (collect.Collector.Finalize): the prefix is in the BackupBucket the entry
// names, with that bucket's credentials; it goes grace after the deletion
// timestamp (Gardener's deletionGracePeriod), at once with the force
// annotation or for an entry never admitted, with the store's lifecycle
// rule as a backstop meanwhile; the finalizer stays until it is gone.
func entryConfig(cl cluster, secrets backupstore.SecretGetter, events eventRecorder, clk clock.WithTicker, grace time.Duration, dryRun bool) collect.Config[*api.BackupEntry] {
	return collect.Config[*api.BackupEntry]{
		Objects: entryObjects{cl}, Secrets: secrets, Recorder: events, Clock: clk, DryRun: dryRun, ReportDryRun: true,
		Finalizer: api.Finalizer, GracePeriod: grace, Backstop: true,
		Location: func(ctx context.Context, e *api.BackupEntry) (collect.Location, error) {
			b, err := cl.Bucket(ctx, e.Spec.BucketName)
			if apierrors.IsNotFound(err) && e.Status.Prefix == "" {
				return collect.Location{}, nil // never admitted: no data
			}
			if err != nil {
				return collect.Location{}, fmt.Errorf("spec.bucketName %q: %w", e.Spec.BucketName, err)
			}
			// Also for an entry without status.prefix: its marker may have
			// been written by an admission whose status update was lost.
			prefix, err := backupstore.EntryPrefix("", e.Name)
			loc := collect.Location{URL: b.Spec.URL, Prefix: prefix}
			if ref := b.Spec.SecretRef; ref != nil {
				loc.Secret, loc.SecretNamespace = ref.Name, ref.Namespace
				loc.SecretField = fmt.Sprintf("spec.secretRef of BackupBucket %q", b.Name)
			} else if scheme, _ := backupstore.Scheme(b.Spec.URL); scheme != "file" && scheme != "mem" {
				return collect.Location{}, fmt.Errorf("BackupBucket %q: spec.secretRef is required for %s:// URLs", b.Name, scheme)
			}
			return loc, err
		},
		Force: func(e *api.BackupEntry) bool {
			return e.Annotations[api.ForceDeletionAnnotation] == "true" || e.Status.Prefix == ""
		},
		OnGrace:       func(e *api.BackupEntry, at time.Time) { e.Status.DeleteAfter = &metav1.Time{Time: at} },
		ConditionType: api.ConditionPrefixDeleted,
		Conditions:    func(e *api.BackupEntry) *[]metav1.Condition { return &e.Status.Conditions },
		Reasons:       collect.Reasons{DeletionFailed: "StoreError", Collected: "PrefixDeleted"},
	}
}

// entryObjects are the entries as the collector reads and writes them.
type entryObjects struct{ cluster }

func (o entryObjects) List(ctx context.Context, _ string) ([]*api.BackupEntry, error) {
	return o.Entries(ctx)
}

func (o entryObjects) Get(ctx context.Context, _, name string) (*api.BackupEntry, error) {
	return o.GetEntry(ctx, name)
}

func (o entryObjects) UpdateStatus(ctx context.Context, e *api.BackupEntry) error {
	_, err := o.UpdateEntryStatus(ctx, e)
	return err
}

func (o entryObjects) Update(ctx context.Context, e *api.BackupEntry) error {
	_, err := o.UpdateEntry(ctx, e)
	return err
}

func (o entryObjects) Delete(context.Context, string, string, types.UID, string) error {
	return errors.New("entries are deleted by Gardener, not by the collector")
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
