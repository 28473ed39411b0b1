package main

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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	// The stores a bucket URL may name: each provider links its cloud's SDK.
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore" // azblob://
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"   // gs://
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"    // s3://
	"github.com/groundskeeper-io/groundskeeper/examples/aerospike-gc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// backups reads and writes AerospikeNamespaceBackups: the dynamic client
// (and its informer cache) in a cluster, a map in the scenario.
type backups interface {
	// List returns the backups of a namespace; it may read a cache.
	List(ctx context.Context, namespace string) ([]*api.AerospikeNamespaceBackup, error)
	// Get reads one backup from the API server.
	Get(ctx context.Context, namespace, name string) (*api.AerospikeNamespaceBackup, error)
	UpdateStatus(ctx context.Context, b *api.AerospikeNamespaceBackup) error
	// Delete deletes the backup only if it still has this UID and
	// resourceVersion; otherwise the API server answers Conflict.
	Delete(ctx context.Context, namespace, name string, uid types.UID, resourceVersion string) error
}

// claimReader reads one claim from the API server: lifecycle.Client does.
type claimReader interface {
	GetClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
}

// bucketOpener opens a bucket URL with the credentials of a backup's Secret,
// and returns the function that releases it: backupstore.OpenBucket and
// Bucket.Close, except in the scenario, whose in-memory buckets outlive a
// pass.
type bucketOpener func(ctx context.Context, url string, creds *backupstore.Credentials) (*blob.Bucket, func() error, error)

// openBucket is the bucketOpener of the controller.
func openBucket(ctx context.Context, url string, creds *backupstore.Credentials) (*blob.Bucket, func() error, error) {
	b, err := backupstore.OpenBucket(ctx, url, creds)
	if err != nil {
		return nil, nil, err
	}
	return b, b.Close, nil
}

// collector is aerospike-operator's garbage collector: one pass deletes the
// expired backups (their data first, then the resource) and the expired
// claims. It decides from (objects, clock.Now()); everything it does goes
// through the interfaces above, so that the controller and the scenario run
// the same code.
type collector struct {
	namespace string
	backups   backups
	secrets   backupstore.SecretGetter
	claims    claimReader
	open      bucketOpener
	// lifecycle tracks unmounts and collects expired claims.
	lifecycle  *lifecycle.Manager
	claimScope lifecycle.Scope
	recorder   lifecycle.EventRecorder
	clock      clock.PassiveClock
	// dryRun: decide and report, write nothing.
	dryRun bool
	// retryAfter is how long a backup whose data could not be deleted waits
	// before the next attempt.
	retryAfter time.Duration
	// notBefore holds, per backup UID, when its next attempt is due after
	// a failure, so that the passes that status updates and other changes
	// trigger do not hammer a store that is down.
	notBefore map[types.UID]time.Time
}

// Event reasons besides the DataDeleted condition's.
const (
	reasonInvalidTTL      = "InvalidTTL"
	reasonBackupCollected = "BackupCollected"
)

// outcome is what a pass did (or, in a dry run, would do) with one expired
// backup.
type outcome struct {
	Backup string
	// Deleted: the data and the resource are gone (in a dry run: would be).
	Deleted bool
	// Reason is a condition reason when the backup was kept (Deleted false).
	Reason string
	// Message says what happened, for people.
	Message string
	// retryAt, for a backup kept because of Object Lock, is when the
	// retention ends: the next attempt waits for it, not for retryAfter.
	retryAt time.Time
}

// report is the result of one pass.
type report struct {
	Now     time.Time
	Backups []outcome
	Claims  lifecycle.CollectResult
	// RequeueAfter is when the next pass is due by time alone (a backup or
	// a claim expires, a failed deletion is retried); 0 if never.
	RequeueAfter time.Duration
}

// backupPolicy is the retention policy of one backup: spec.ttl from the
// creation timestamp, where "0d" (or no ttl) keeps it forever.
func backupPolicy(b *api.AerospikeNamespaceBackup) (retention.Policy, error) {
	if b.Spec.TTL == "" {
		return retention.TTL{ZeroMeansForever: true}, nil
	}
	ttl, err := retention.ParseDuration(b.Spec.TTL)
	if err != nil {
		return nil, fmt.Errorf("backup %s/%s: spec.ttl %q: %w", b.Namespace, b.Name, b.Spec.TTL, err)
	}
	return retention.TTL{After: ttl, ZeroMeansForever: true}, nil
}

// decide reports whether b has expired at now and, if not, when it will
// (zero: never).
func decide(b *api.AerospikeNamespaceBackup, now time.Time) (expired bool, at time.Time, err error) {
	p, err := backupPolicy(b)
	if err != nil {
		return false, time.Time{}, err
	}
	var res retention.Result
	item := retention.Item{ID: b.Namespace + "/" + b.Name, Time: b.CreationTimestamp.Time}
	// Each backup has its own TTL and is judged alone: the guard, which
	// keeps the newest item of a group, would keep every backup.
	alone := retention.Options{AllowDeleteNewest: true}
	if err := alone.Evaluate(p, now, []retention.Item{item}, &res); err != nil {
		return false, time.Time{}, err
	}
	d := res.Decisions[0]
	return !d.Keep, d.DeletableAt, nil
}

// storageURL is the gocloud URL of a backup's bucket.
func storageURL(s api.BackupStorageSpec) (string, error) {
	scheme, ok := map[string]string{"gcs": "gs", "s3": "s3", "azure": "azblob"}[s.Type]
	if !ok {
		return "", fmt.Errorf("spec.storage.type %q: want gcs, s3 or azure", s.Type)
	}
	if s.Bucket == "" || strings.ContainsAny(s.Bucket, "/?#") {
		return "", fmt.Errorf("spec.storage.bucket %q: want a bucket name", s.Bucket)
	}
	return scheme + "://" + s.Bucket, nil
}

// dataPrefix is where a backup's data is: every key under
// <prefix>/<namespace>/<name>/. The trailing "/" keeps backup "b1" away from
// "b10"; backupstore.DeletePrefix refuses prefixes without it.
func dataPrefix(b *api.AerospikeNamespaceBackup) string {
	p := b.Spec.Storage.Prefix
	if p == "" {
		p = api.DefaultPrefix
	}
	// Joined as it is, not cleaned: a ".." in spec.storage.prefix must
	// reach backupstore.CheckPrefix and be refused, not be resolved away.
	return p + "/" + b.Namespace + "/" + b.Name + "/"
}

// nestedWith returns a backup of all, other than b, whose data in the same
// bucket lies under b's data prefix, or under which b's lies; nil if none.
// Two prefixes in the same bucket are compared whatever their credentials:
// the same bucket name behind another endpoint is refused too, which costs
// a kept backup at worst.
func nestedWith(b *api.AerospikeNamespaceBackup, all []*api.AerospikeNamespaceBackup) *api.AerospikeNamespaceBackup {
	url, err := storageURL(b.Spec.Storage)
	if err != nil {
		return nil
	}
	p := dataPrefix(b)
	for _, o := range all {
		if o.Name == b.Name { // the same backup: all are of one namespace
			continue
		}
		if u, err := storageURL(o.Spec.Storage); err != nil || u != url {
			continue
		}
		if q := dataPrefix(o); strings.HasPrefix(q, p) || strings.HasPrefix(p, q) {
			return o
		}
	}
	return nil
}

// pass runs one collection over the backups and the claims of the
// namespace. Errors that concern one backup are in its outcome (and its
// event and condition); the error is for what stopped the pass.
func (c *collector) pass(ctx context.Context) (report, error) {
	now := c.clock.Now()
	rep := report{Now: now}
	var next time.Time
	soonest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}

	list, err := c.backups.List(ctx, c.namespace)
	if err != nil {
		return rep, fmt.Errorf("list backups: %w", err)
	}
	slices.SortFunc(list, func(a, b *api.AerospikeNamespaceBackup) int { return strings.Compare(a.Name, b.Name) })
	for uid := range c.notBefore { // forget backups that are gone
		if !slices.ContainsFunc(list, func(b *api.AerospikeNamespaceBackup) bool { return b.UID == uid }) {
			delete(c.notBefore, uid)
		}
	}
	for _, b := range list {
		if b.DeletionTimestamp != nil {
			continue
		}
		if t, ok := c.notBefore[b.UID]; ok && now.Before(t) {
			soonest(t)
			continue
		}
		var o outcome
		expired, at, err := decide(b, now)
		switch {
		case err != nil:
			// Never delete on the strength of a field we cannot read.
			o = c.keep(ctx, b, reasonInvalidTTL, err.Error())
		case !expired:
			soonest(at)
			continue
		default:
			o = c.collectBackup(ctx, b, list)
		}
		if !o.Deleted && !c.dryRun && o.Reason != "" {
			at := now.Add(c.retryAfter)
			if !o.retryAt.IsZero() {
				at = o.retryAt
			}
			c.notBefore[b.UID] = at
			soonest(at)
		}
		if o.Backup != "" {
			rep.Backups = append(rep.Backups, o)
		}
	}

	res, err := c.lifecycle.Collect(ctx, lifecycle.CollectOptions{Scope: c.claimScope, DryRun: c.dryRun})
	rep.Claims = res
	if !c.dryRun {
		for _, d := range res.Deleted {
			c.recorder.Event(&corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolumeClaim",
				Namespace: c.namespace, Name: d.Claim, UID: d.UID}, corev1.EventTypeNormal, lifecycle.ReasonClaimCollected, d.Reason)
		}
	}
	if err != nil {
		return rep, fmt.Errorf("collect claims: %w", err)
	}
	soonest(res.Next)
	if !next.IsZero() {
		rep.RequeueAfter = max(next.Sub(now), time.Nanosecond)
	}
	return rep, nil
}

// collectBackup deletes an expired backup's data, then the resource. It
// reads the backup afresh and decides again first: the cache may be behind
// a change of spec.ttl. The resource is deleted only after the data is, and
// only in the version decided on (UID and resourceVersion preconditions).
//
// It refuses, and keeps the backup, when the data prefix of another backup of
// all (the namespace's) in the same bucket nests with this one's: deleting
// this data would delete some of the other's.
func (c *collector) collectBackup(ctx context.Context, cached *api.AerospikeNamespaceBackup, all []*api.AerospikeNamespaceBackup) outcome {
	log := logr.FromContextOrDiscard(ctx).WithValues("backup", cached.Name)
	b, err := c.backups.Get(ctx, cached.Namespace, cached.Name)
	switch {
	case apierrors.IsNotFound(err):
		return outcome{}
	case err != nil:
		return outcome{Backup: cached.Name, Reason: api.ReasonDeletionFailed, Message: fmt.Sprintf("read backup: %v", err)}
	case b.UID != cached.UID || b.DeletionTimestamp != nil:
		return outcome{}
	}
	if expired, _, err := decide(b, c.clock.Now()); err != nil || !expired {
		return outcome{} // changed since: the next pass decides on the new version
	}
	s := b.Spec.Storage
	url, err := storageURL(s)
	if err != nil {
		return c.keep(ctx, b, api.ReasonDeletionFailed, err.Error())
	}
	prefix := dataPrefix(b)
	where := url + "/" + prefix
	if o := nestedWith(b, all); o != nil {
		return c.keep(ctx, b, api.ReasonNestedPrefix, fmt.Sprintf(
			"the data of backup %s is under %s%s, which nests with %s: deleting %s would delete some of its data; nothing was deleted, move one of them",
			o.Name, url+"/", dataPrefix(o), where, where))
	}
	scheme, _ := backupstore.Scheme(url) // valid: storageURL built it

	creds, err := backupstore.LoadCredentials(ctx, c.secrets, b.Namespace, s.Secret, scheme)
	switch {
	case errors.Is(err, backupstore.ErrSecretNotFound):
		// aerospike-operator's rule: warn, and delete nothing.
		return c.keep(ctx, b, api.ReasonSecretNotFound,
			fmt.Sprintf("spec.storage.secret %q not found: the data under %s was not deleted and the backup is kept", s.Secret, where))
	case errors.Is(err, backupstore.ErrSecretKeyMissing):
		return c.keep(ctx, b, api.ReasonInvalidCredentials, fmt.Sprintf("%v: the data under %s was not deleted", err, where))
	case err != nil:
		return c.keep(ctx, b, api.ReasonDeletionFailed, fmt.Sprintf("read spec.storage.secret %q: %v", s.Secret, err))
	}
	bucket, release, err := c.open(ctx, url, creds)
	if err != nil {
		return c.keep(ctx, b, api.ReasonDeletionFailed, fmt.Sprintf("open %s: %v", url, err))
	}
	defer release()
	res, err := backupstore.DeletePrefix(ctx, bucket, prefix, &backupstore.DeleteOptions{DryRun: c.dryRun})
	if re := retainedOnly(err); re != nil {
		// Nothing helps before the retention ends: keep the backup, say
		// until when, and come back then.
		o := c.keep(ctx, b, api.ReasonRetained, fmt.Sprintf("deleted %d objects under %s; %v", res.Deleted, where, re))
		o.retryAt = re.RetryAt
		if o.retryAt.IsZero() { // only legal holds, which have no end
			o.retryAt = c.clock.Now().Add(max(c.retryAfter, time.Hour))
		}
		return o
	}
	if err != nil {
		// Never delete the resource while data may be left: it is the only
		// record of where the data is.
		return c.keep(ctx, b, api.ReasonDeletionFailed,
			fmt.Sprintf("deleted %d objects under %s, then: %v", res.Deleted, where, err))
	}
	ttlNote := fmt.Sprintf("spec.ttl %s from %s ran out", b.Spec.TTL, b.CreationTimestamp.UTC().Format(time.RFC3339))
	if c.dryRun {
		log.Info("dry run: would delete the backup's data and the resource", "objects", len(res.Keys), "bytes", res.Bytes, "where", where)
		return outcome{Backup: b.Name, Deleted: true,
			Message: fmt.Sprintf("dry run: would delete %d objects (%d bytes) under %s, then the resource (%s)", len(res.Keys), res.Bytes, where, ttlNote)}
	}
	msg := fmt.Sprintf("deleted %d objects (%d bytes) under %s (%s)", res.Deleted, res.DeletedBytes, where, ttlNote)
	err = c.backups.Delete(ctx, b.Namespace, b.Name, b.UID, b.ResourceVersion)
	switch {
	case err == nil, apierrors.IsNotFound(err):
	case apierrors.IsConflict(err):
		// Changed after the fresh read: the next pass decides again; if it
		// is still expired, the deletion finds no data and goes on.
		log.Info("backup changed while its data was deleted; deciding again", "error", err)
		return outcome{Backup: b.Name, Message: msg + "; the resource changed meanwhile and is decided on again"}
	default:
		return c.keep(ctx, b, api.ReasonDeletionFailed, msg+"; deleting the resource failed: "+err.Error())
	}
	delete(c.notBefore, b.UID)
	log.Info("collected expired backup", "message", msg)
	c.recorder.Event(backupRef(b), corev1.EventTypeNormal, reasonBackupCollected, msg+", then the resource")
	return outcome{Backup: b.Name, Deleted: true, Message: msg + ", then the resource"}
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

// keep records why an expired backup is kept: a Warning event and the
// DataDeleted=False condition. A dry run only reports it.
func (c *collector) keep(ctx context.Context, b *api.AerospikeNamespaceBackup, reason, msg string) outcome {
	log := logr.FromContextOrDiscard(ctx).WithValues("backup", b.Name)
	o := outcome{Backup: b.Name, Reason: reason, Message: msg}
	log.Info("backup kept", "reason", reason, "message", msg, "dryRun", c.dryRun)
	if c.dryRun {
		return o
	}
	c.recorder.Event(backupRef(b), corev1.EventTypeWarning, reason, msg)
	if reason == reasonInvalidTTL {
		return o // not about the data: no DataDeleted condition
	}
	b = b.DeepCopy()
	if meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: api.ConditionDataDeleted, Status: metav1.ConditionFalse, Reason: reason, Message: msg,
		ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now()),
	}) {
		if err := c.backups.UpdateStatus(ctx, b); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			log.Error(err, "update status")
		}
	}
	return o
}

func backupRef(b *api.AerospikeNamespaceBackup) *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: api.Group + "/" + api.Version, Kind: api.Kind,
		Namespace: b.Namespace, Name: b.Name, UID: b.UID, ResourceVersion: b.ResourceVersion}
}

// markUnmounted records on the claim that the pod it belongs to (its
// pod-name annotation) is gone, now: the seed's last-unmounted-on
// annotation, set when a pod that mounted the claim is deleted. lifecycle
// decides on a fresh list of the namespace's pods, not on the event, which
// may come late: a claim that a pod mounts again is not marked (and an
// out-of-date mark is removed). It reports whether the claim is marked
// unmounted (in a dry run: would be). Claims without the pod-name
// annotation, or outside --claim-selector, are left alone.
func (c *collector) markUnmounted(ctx context.Context, claimName string) (bool, error) {
	ann := c.lifecycle.Annotations()
	claim, err := c.claims.GetClaim(ctx, c.namespace, claimName)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	podName := claim.Annotations[ann.PodNameKey()]
	if podName == "" || claim.DeletionTimestamp != nil {
		return false, nil // not tracked, or going
	}
	if sel := c.claimScope.Selector; sel != nil && !sel.Matches(labels.Set(claim.Labels)) {
		return false, nil // not one of the claims this collector looks after
	}
	if c.dryRun {
		_, done := claim.Annotations[ann.LastUnmountedKey()]
		return !done, nil
	}
	return c.lifecycle.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: c.namespace, Pod: podName, Claim: claimName})
}
