package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
)

// The annotations a Pool with Config.DeleteEmptyAfter writes on its
// buckets. They are metadata, not status, so that a bucket type needs no
// field for them, and so that Share (which knows no status field of the
// pool's) sees the mark too; they are written with the resourceVersion
// read, like the claims in the status, so a mark and a claim never both
// succeed on one version.
const (
	// AnnotationEmptySince is when the Pool found the bucket empty (RFC
	// 3339, UTC): no claim and no entry naming it on the API server. It
	// is removed as soon as a claim or an entry is seen.
	AnnotationEmptySince = "backupstore.groundskeeper.io/empty-since"
	// AnnotationCreatedBy names the pool that created the bucket object
	// (Place, when the pool grew). The Pool deletes only the buckets it
	// created: a bucket an administrator made, and its store's bucket, are
	// theirs. It says who made the object, not the store's bucket: that
	// one is the object's only when Grower.Provision and Deprovision
	// prove it (Grow's owner marker).
	AnnotationCreatedBy = "backupstore.groundskeeper.io/created-by-pool"
	// AnnotationStoreNotOwned marks a bucket whose store's bucket the
	// Pool could not prove the object's (Grower.Provision or
	// Deprovision returned ErrNotOwned; the value is why): Place puts no
	// entry there, no entry is admitted to it, and the Pool never deletes
	// it. The Pool removes it once Provision succeeds (an administrator
	// adopted the store's bucket, AnnotationAdoptStore).
	AnnotationStoreNotOwned = "backupstore.groundskeeper.io/store-not-owned"
)

// The reasons of the events of a Pool's bucket deletion.
const (
	// ReasonEmptyBucketDeleted (Normal): the store's bucket is deleted
	// and the bucket object is being deleted.
	ReasonEmptyBucketDeleted = "EmptyBucketDeleted"
	// ReasonDeletionCancelled (Normal): a marked bucket was found in use
	// and stays.
	ReasonDeletionCancelled = "DeletionCancelled"
	// ReasonDeletionRetained (Warning): the store keeps data under Object
	// Lock; the deletion goes on when it can.
	ReasonDeletionRetained = "DeletionRetained"
	// ReasonDryRun (Normal): what a dry run would delete.
	ReasonDryRun = "DryRun"
	// ReasonStoreNotOwned (Warning, on the bucket; and the Admitted
	// condition's reason of an entry refused for it): the store's bucket
	// is not proven the bucket object's (ErrNotOwned).
	ReasonStoreNotOwned = "StoreNotOwned"
	// ReasonStoreOwned (Normal): a bucket marked StoreNotOwned is proven
	// the owner of its store's bucket.
	ReasonStoreOwned = "StoreOwned"
	// ReasonStoreNotEmpty (Warning): the store's bucket of an empty bucket
	// holds objects besides its owner marker (ErrStoreNotEmpty): they are
	// kept, and the deletion given up until the bucket has been empty for
	// the grace period again.
	ReasonStoreNotEmpty = "StoreNotEmpty"
)

// BucketDeletion is what DeleteEmpty did with one bucket or, in a dry run,
// would do.
type BucketDeletion struct {
	// Bucket is the bucket object's name.
	Bucket string
	// Deleted: the store's bucket is deleted and then the bucket object
	// (it goes once its finalizers are removed); in a dry run, would be.
	Deleted bool
	// Kept says why the bucket stays, when it does and Pool decided it.
	Kept string
	// Store is what the store's deletion did (Grower.Deprovision), in
	// a dry run what it would delete (Keys, Bytes); nil when not called.
	Store *backupstore.DeleteResult
	// After is when to look again; 0 for when the bucket changes.
	After time.Duration
}

func (p *Pool[E, B]) deleting(b B) bool {
	_, ok := b.GetAnnotations()[share.AnnotationDeleting]
	return ok
}

// DeleteEmpty deletes bucket b, read from a cache, if it has been empty
// for Config.DeleteEmptyAfter; ReconcileBucket calls it first. A
// bucket is empty when its claims are empty and no entry names it,
// deleted or not. Only a bucket the pool created (AnnotationCreatedBy) is
// ever deleted, and only with its store's bucket proven the object's
// (Deprovision refuses one that is not: the bucket is then marked
// AnnotationStoreNotOwned and kept for good). In turn, on successive
// calls:
//
//   - a bucket in use (by the cache) loses its empty-since stamp;
//   - one bucket of its pool is kept, so that the next entry of the pool
//     finds a place without waiting for a bucket to be created: the
//     administrator's if the pool has one (a bucket it did not create),
//     otherwise its first by name (not being deleted);
//   - an empty bucket without a stamp is read fresh (Get, LiveEntries)
//     and, if still empty, stamped with the time (AnnotationEmptySince);
//   - a stamped bucket is kept until the stamp plus DeleteEmptyAfter;
//   - then, decided again on a fresh read, it is marked
//     (AnnotationDeleting) with the resourceVersion read, so that a place
//     taken in between makes the mark fail; then, read fresh again, it is
//     given up if an entry or a claim appeared before the mark; the
//     store's bucket is deleted (Deprovision: with Grow's, only when it
//     holds nothing but its owner marker: ErrStoreNotEmpty gives the
//     deletion up, with a Warning StoreNotEmpty, and the bucket is
//     stamped again later); a last fresh
//     read gives up if an entry appeared meanwhile (its store's bucket is
//     provisioned again); the bucket object is deleted with the UID and
//     resourceVersion of that read, and goes when Share removes its
//     finalizer.
//
// Data under Object Lock stops the deletion (not an error): Kept and
// After say when it can go on. In a dry run (Config.DryRun) the
// stamp is still written, nothing is marked or deleted, and the result
// says what the store's deletion would delete.
func (p *Pool[E, B]) DeleteEmpty(ctx context.Context, b B) (BucketDeletion, error) {
	d, _, err := p.deleteEmpty(ctx, b)
	return d, err
}

// deleteEmpty is DeleteEmpty; wrote says that it wrote the bucket, whose
// change reconciles it again.
func (p *Pool[E, B]) deleteEmpty(ctx context.Context, b B) (d BucketDeletion, wrote bool, err error) {
	d.Bucket = b.GetName()
	pool := p.cfg.Member(b)
	if b.GetDeletionTimestamp() != nil {
		return d, false, nil
	}
	if p.cfg.DeleteEmptyAfter <= 0 || !createdBy(b, pool) || p.notOwned(b) {
		// No deletion (any more): a stamp or a mark left from one goes.
		a := b.GetAnnotations()
		if _, ok := a[AnnotationEmptySince]; !ok {
			if _, ok := a[share.AnnotationDeleting]; !ok {
				return d, false, nil
			}
		}
		err := p.annotate(ctx, b, nil, share.AnnotationDeleting, AnnotationEmptySince)
		return d, err == nil, err
	}
	if p.deleting(b) {
		return p.finishDeletion(ctx, b)
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("bucket", b.GetName(), "pool", pool)
	since, stamped := emptySince(b)
	inUse, err := p.inUseOrKept(ctx, b, pool)
	if err != nil {
		return d, false, err
	}
	if inUse != "" {
		d.Kept = inUse
		if !stamped {
			return d, false, nil
		}
		err := p.annotate(ctx, b, nil, AnnotationEmptySince)
		return d, err == nil, err
	}
	now := p.cfg.Share.Config().Clock.Now()
	if !stamped {
		fresh, inUse, err := p.inUseFresh(ctx, b)
		if err != nil || inUse != "" {
			d.Kept = inUse
			return d, false, client404(err)
		}
		if err := p.annotate(ctx, fresh, map[string]string{AnnotationEmptySince: stamp(now)}); err != nil {
			return d, false, err
		}
		log.Info("bucket empty", "deleteAfter", p.cfg.DeleteEmptyAfter)
		d.Kept, d.After = "empty, in its grace period", p.cfg.DeleteEmptyAfter
		return d, true, nil
	}
	if due := since.Add(p.cfg.DeleteEmptyAfter); now.Before(due) {
		d.Kept, d.After = fmt.Sprintf("empty since %s, kept until %s", stamp(since), stamp(due)), due.Sub(now)
		return d, false, nil
	}
	// Decided on a fresh read, the deletion starts with the mark.
	fresh, inUse, err := p.inUseFresh(ctx, b)
	if err != nil {
		return d, false, client404(err)
	}
	if inUse != "" {
		d.Kept = inUse
		err := p.annotate(ctx, fresh, nil, AnnotationEmptySince)
		return d, err == nil, err
	}
	if since, ok := emptySince(fresh); !ok || now.Before(since.Add(p.cfg.DeleteEmptyAfter)) || fresh.GetDeletionTimestamp() != nil || p.cfg.Member(fresh) != pool {
		return d, false, nil // changed since the cache's copy: the change reconciles it again
	}
	if p.cfg.DryRun {
		return p.dryRun(ctx, fresh, d)
	}
	if err := p.annotate(ctx, fresh, map[string]string{share.AnnotationDeleting: stamp(now)}); err != nil {
		return d, false, fmt.Errorf("mark bucket %s for deletion: %w", b.GetName(), err)
	}
	log.Info("bucket deletion decided", "emptySince", stamp(since))
	return p.finishDeletion(ctx, fresh)
}

// inUseOrKept says, from the cache, why bucket b of pool is not empty (an
// entry in it, see inUseCached) or is the bucket the pool keeps; "" when
// neither.
func (p *Pool[E, B]) inUseOrKept(ctx context.Context, b B, pool string) (string, error) {
	inUse, err := p.inUseCached(ctx, b)
	if err != nil || inUse != "" {
		return inUse, err
	}
	kept, err := p.kept(ctx, pool)
	if err != nil {
		return "", err
	}
	if kept == b.GetName() {
		return "the bucket pool " + pool + " keeps", nil
	}
	return "", nil
}

// finishDeletion deletes a marked bucket: the store's bucket, then the
// object, each after a fresh read that finds it empty; a bucket in use
// loses its mark instead.
func (p *Pool[E, B]) finishDeletion(ctx context.Context, b B) (d BucketDeletion, wrote bool, err error) {
	d.Bucket = b.GetName()
	log := logr.FromContextOrDiscard(ctx).WithValues("bucket", b.GetName())
	rec := p.cfg.Share.Config().Recorder
	cancel := func(fresh B, inUse string) (BucketDeletion, bool, error) {
		d.Kept = inUse
		if err := p.annotate(ctx, fresh, nil, share.AnnotationDeleting, AnnotationEmptySince); err != nil {
			return d, false, fmt.Errorf("give up the deletion of bucket %s: %w", b.GetName(), err)
		}
		log.Info("bucket deletion given up", "why", inUse)
		rec.Event(fresh, corev1.EventTypeNormal, ReasonDeletionCancelled, "deletion given up: "+inUse)
		return d, true, nil
	}
	fresh, inUse, err := p.inUseFresh(ctx, b)
	if err != nil || fresh.GetDeletionTimestamp() != nil || !p.deleting(fresh) {
		return d, false, client404(err) // gone, going, or not marked: a stale copy
	}
	if p.cfg.Member(fresh) == "" {
		inUse = "no longer a member of a pool"
	}
	if inUse != "" {
		return cancel(fresh, inUse)
	}
	if p.cfg.DryRun {
		return p.dryRun(ctx, fresh, d)
	}
	res, err := p.deprovisionStore(ctx, fresh, nil)
	d.Store = res
	if errors.Is(err, ErrStoreNotEmpty) {
		// Data no entry of the pool owns: kept, and the bucket in service
		// again; stamped empty again, it is tried after the grace period.
		d.Store = nil
		rec.Event(fresh, corev1.EventTypeWarning, ReasonStoreNotEmpty, err.Error())
		return cancel(fresh, err.Error())
	}
	if errors.Is(err, ErrNotOwned) {
		// Never the pool's to delete: given up for good, and marked.
		d.Store, d.Kept = nil, err.Error()
		if err := p.annotate(ctx, fresh, map[string]string{AnnotationStoreNotOwned: err.Error()}, share.AnnotationDeleting, AnnotationEmptySince); err != nil {
			return d, false, fmt.Errorf("give up the deletion of bucket %s: %w", b.GetName(), err)
		}
		log.Info("bucket deletion given up: the store's bucket is not the bucket's", "why", err.Error())
		rec.Event(fresh, corev1.EventTypeWarning, ReasonStoreNotOwned, "deletion given up: "+err.Error())
		return d, true, nil
	}
	if re := (*backupstore.RetainedError)(nil); errors.As(err, &re) {
		now := p.cfg.Share.Config().Clock.Now()
		d.After = p.cfg.DeleteEmptyAfter // legal holds: look again now and then
		d.Kept = "data under Object Lock, all under a legal hold"
		if !re.RetryAt.IsZero() {
			d.After = max(re.RetryAt.Sub(now), time.Second)
			d.Kept = "data under Object Lock until " + stamp(re.RetryAt)
		}
		log.Info("bucket deletion waits", "why", d.Kept)
		rec.Event(fresh, corev1.EventTypeWarning, ReasonDeletionRetained, "deletion waits: "+d.Kept)
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("delete the store's bucket of %s: %w", b.GetName(), err)
	}
	fresh, inUse, err = p.inUseFresh(ctx, fresh)
	if err != nil || fresh.GetDeletionTimestamp() != nil || !p.deleting(fresh) {
		return d, false, client404(err)
	}
	if inUse != "" {
		return cancel(fresh, inUse)
	}
	if err := p.cfg.Share.Config().Buckets.Delete(ctx, fresh.GetNamespace(), fresh.GetName(), fresh.GetUID(), fresh.GetResourceVersion()); err != nil && !apierrors.IsNotFound(err) {
		return d, false, fmt.Errorf("delete bucket %s: %w", b.GetName(), err)
	}
	d.Deleted = true
	msg := "empty bucket deleted"
	if res != nil {
		msg = fmt.Sprintf("empty bucket deleted, with %d objects (%d bytes) left in the store", res.Deleted, res.DeletedBytes)
	}
	log.Info(msg)
	rec.Event(fresh, corev1.EventTypeNormal, ReasonEmptyBucketDeleted, msg)
	return d, true, nil
}

// dryRun reports what the deletion of b would delete.
func (p *Pool[E, B]) dryRun(ctx context.Context, b B, d BucketDeletion) (BucketDeletion, bool, error) {
	res, err := p.deprovisionStore(ctx, b, &backupstore.DeleteOptions{DryRun: true})
	d.Store = res
	if errors.Is(err, ErrNotOwned) || errors.Is(err, ErrStoreNotEmpty) {
		reason := ReasonStoreNotOwned
		if errors.Is(err, ErrStoreNotEmpty) {
			reason = ReasonStoreNotEmpty
		}
		d.Store, d.Kept = nil, err.Error()
		msg := "dry run: would not delete the empty bucket: " + err.Error()
		logr.FromContextOrDiscard(ctx).Info(msg, "bucket", b.GetName())
		p.cfg.Share.Config().Recorder.Event(b, corev1.EventTypeWarning, reason, msg)
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("dry run: list the store's bucket of %s: %w", b.GetName(), err)
	}
	d.Deleted = true
	msg := "dry run: would delete the empty bucket"
	if res != nil {
		msg = fmt.Sprintf("dry run: would delete the empty bucket and its %d objects (%d bytes)", len(res.Keys), res.Bytes)
	}
	logr.FromContextOrDiscard(ctx).Info(msg, "bucket", b.GetName())
	p.cfg.Share.Config().Recorder.Event(b, corev1.EventTypeNormal, ReasonDryRun, msg)
	return d, false, nil
}

// inUseCached says why b, read from a cache, is in use by the cache's
// entries; "" when it is not.
func (p *Pool[E, B]) inUseCached(ctx context.Context, b B) (string, error) {
	all, err := p.cfg.Share.Config().Entries.List(ctx, "")
	if err != nil {
		return "", err
	}
	return p.inUse(b, all), nil
}

// inUseFresh reads b from the API server and says why it is in use by the
// entries LiveEntries lists; "" when it is not. This is the one rule a
// deletion is decided on, at every step.
func (p *Pool[E, B]) inUseFresh(ctx context.Context, b B) (B, string, error) {
	fresh, err := p.cfg.Share.Config().Buckets.Get(ctx, b.GetNamespace(), b.GetName())
	if err != nil {
		return fresh, "", err
	}
	all, err := p.cfg.LiveEntries(ctx)
	if err != nil {
		return fresh, "", fmt.Errorf("list entries from the API server: %w", err)
	}
	return fresh, p.inUse(fresh, all), nil
}

func (p *Pool[E, B]) inUse(b B, entries []E) string {
	var why []string
	if c := *p.cfg.Claims(b); len(c) > 0 {
		why = append(why, fmt.Sprintf("places taken by %s", strings.Join(c, ", ")))
	}
	var names []string
	for _, e := range entries {
		if ns, name := p.cfg.Share.BucketOf(e); ns == b.GetNamespace() && name == b.GetName() {
			names = append(names, claimKey(e))
		}
	}
	if len(names) > 0 {
		slices.Sort(names)
		why = append(why, fmt.Sprintf("%s %s name it", p.cfg.Share.Config().Names.Entries, strings.Join(names, ", ")))
	}
	return strings.Join(why, "; ")
}

// kept names the bucket of a pool that is kept however long it is empty,
// by the cache, so that the pool's next entry finds a place without
// waiting for a bucket to be created: a bucket the pool did not create
// (an administrator's, never deleted anyway) if it has one, otherwise its
// first bucket by name that is neither deleted nor marked (for deletion,
// or as not owning its store's bucket: it takes no entry).
func (p *Pool[E, B]) kept(ctx context.Context, pool string) (string, error) {
	all, err := p.cfg.Share.Config().Buckets.List(ctx, "")
	if err != nil {
		return "", err
	}
	first := ""
	for _, b := range all {
		if p.cfg.Member(b) != pool || b.GetDeletionTimestamp() != nil || p.deleting(b) || p.notOwned(b) {
			continue
		}
		if !createdBy(b, pool) {
			return b.GetName(), nil
		}
		if first == "" || b.GetName() < first {
			first = b.GetName()
		}
	}
	return first, nil
}

// annotate sets and removes annotations of b and writes it with the
// resourceVersion b was read with.
func (p *Pool[E, B]) annotate(ctx context.Context, b B, set map[string]string, remove ...string) error {
	b = b.DeepCopyObject().(B)
	a := maps.Clone(b.GetAnnotations())
	if a == nil {
		a = map[string]string{}
	}
	maps.Copy(a, set)
	for _, k := range remove {
		delete(a, k)
	}
	b.SetAnnotations(a)
	return p.cfg.Share.Config().Buckets.Update(ctx, b)
}

func emptySince(b interface{ GetAnnotations() map[string]string }) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, b.GetAnnotations()[AnnotationEmptySince])
	return t, err == nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// client404 drops NotFound: a bucket that is gone needs nothing.
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
