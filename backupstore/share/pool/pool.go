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
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// ErrPoolFull is returned by Place when a pool's buckets are full and a
// new bucket was asked for: place the entry again once it is there.
var ErrPoolFull = errclass.Retryable("share: every bucket of the pool is full")

// ErrNotOwned is returned by Grow's Provision and Deprovision for a store
// bucket that its bucket object cannot be proven to own (no owner marker,
// or one naming another object): the pool admits no entry to it and never
// deletes it.
var ErrNotOwned = errclass.Terminal("share: the store's bucket is not the bucket object's")

// ErrStoreNotEmpty is returned by Grow's Deprovision for a store bucket
// that holds anything besides its owner marker: no entry of the pool owns
// that data any more (their collectors deleted theirs), so it may be
// another's (an entry of another installation admitted to the same store
// bucket, a writer's late backup), and it is not deleted. The Pool gives
// the deletion up (DeletionCancelled) and tries again when the bucket has
// been empty for its grace period once more.
var ErrStoreNotEmpty = errclass.Retryable("share: the store's bucket holds objects besides its owner marker")

// Config says how entries that name no bucket are placed in a pool of
// buckets (Gardener's buckets per provider and region, each with the
// quota's limit of entries), and how the pool grows.
type Config[E, B collect.Object] struct {
	// Share gives the entries, the buckets and each bucket's Limit.
	Share *share.Share[E, B]
	// Pool names the pool an entry is placed in ("aws/eu-west-1"), or an
	// error that says why it has none (an unknown provider). Required.
	Pool func(E) (string, error)
	// Member names the pool a bucket belongs to; "" for none. Required.
	Member func(B) string
	// Grower builds the pool's next bucket object and, if it has the
	// methods (Grow has), creates and deletes the store's bucket behind
	// one (see Grower). Required.
	Grower Grower[B]
	// Create creates a bucket object (AlreadyExists if it exists).
	// Required.
	Create func(ctx context.Context, b B) error
	// Claims points at the bucket's status field that lists the entries
	// placed in it: a place is taken by a status write with the bucket's
	// resourceVersion, so two placements never take the last place
	// twice, whichever replica makes them. Required.
	Claims func(B) *[]string
	// Assign records the chosen bucket on the entry (its spec field that
	// Share's Config.Bucket reads). Required.
	Assign func(e E, namespace, name string)
	// GrowWait is when an entry is placed again after its pool grew;
	// default 1s.
	GrowWait time.Duration

	// DeleteEmptyAfter is the grace period of an empty bucket: a bucket
	// of a pool that has had no claim and no entry naming it for this
	// long is deleted, the store's bucket first (Deprovision), then the
	// object (see DeleteEmpty). The pool keeps one bucket (see
	// DeleteEmpty). 0, the
	// default, never deletes a bucket (and removes a stamp or a mark left
	// from a deletion that was on).
	DeleteEmptyAfter time.Duration
	// LiveEntries lists every entry (all that Share's Entries.List
	// lists) from the API server, never from a cache: a bucket is
	// deleted only when it finds none naming it
	// (crt/backups.LiveList). Required with DeleteEmptyAfter.
	LiveEntries func(ctx context.Context) ([]E, error)
	// DryRun: DeleteEmpty marks and deletes nothing, and reports what the
	// deletion of a bucket whose grace period is over would delete (the
	// result, a log line and a DryRun event). The empty-since stamp is
	// still written.
	DryRun bool
}

// Grower grows a pool: NewBucket builds the n-th bucket (n from 1) of a
// pool, with its name, its Member and its Limit; an error refuses (a
// limit of 0). The name must follow from pool and n alone: two replicas
// that grow the pool at once then create the same object, and the second
// gets AlreadyExists. Grow is a Grower, and has both optional methods,
// which the Pool finds on the Grower at run time:
//
//	Provision(ctx context.Context, b B) error
//
// creates the store's bucket behind a live bucket object
// (backupstore.CreateBucket) and, for a bucket the pool created, proves it
// the object's: an error wrapping ErrNotOwned when the store bucket
// existed and is not the object's (Grow.Provision, with an owner marker).
// It is called on every reconcile of the bucket (but a bucket stamped
// empty or marked for deletion, see ReconcileBucket), and, on a fresh read
// of the bucket, before each admission of an entry to it, so "already
// exists" never stands for "mine": an entry is admitted only after it
// succeeded, and ErrNotOwned refuses the entry (StoreNotOwned) and marks
// the bucket (AnnotationStoreNotOwned) so that Place puts no entry there.
// It must succeed when the bucket exists and is the object's.
//
//	Deprovision(ctx context.Context, b B, opts *backupstore.DeleteOptions) (*backupstore.DeleteResult, error)
//
// deletes the store's bucket behind a bucket object: backupstore.DeleteBucket
// with the bucket's URL and credentials and opts (nil, or a dry run). A
// bucket already gone is success; data under Object Lock is
// backupstore.ErrRetained. It must refuse, with an error wrapping
// ErrNotOwned, a store bucket it cannot prove the object's, checked right
// before the deletion (Grow.Deprovision reads the owner marker): the
// deletion is then given up and the bucket marked
// (AnnotationStoreNotOwned). An error wrapping ErrStoreNotEmpty
// (Grow.Deprovision's, for a store bucket holding objects besides its
// marker) gives the deletion up until the bucket has been empty for
// DeleteEmptyAfter again. Required with DeleteEmptyAfter.
type Grower[B collect.Object] interface {
	NewBucket(pool string, n int) (B, error)
}

// GrowerFunc is a Grower of NewBucket alone: the pool makes the bucket
// objects, and the store's buckets behind them are not its to create or
// delete (an administrator's, or another controller's).
type GrowerFunc[B collect.Object] func(pool string, n int) (B, error)

// NewBucket is f(pool, n).
func (f GrowerFunc[B]) NewBucket(pool string, n int) (B, error) { return f(pool, n) }

// provisioner and deprovisioner are a Grower's optional methods.
type provisioner[B collect.Object] interface {
	Provision(ctx context.Context, b B) error
}

type deprovisioner[B collect.Object] interface {
	Deprovision(ctx context.Context, b B, opts *backupstore.DeleteOptions) (*backupstore.DeleteResult, error)
}

var (
	_ Grower[collect.Object]        = Grow[collect.Object]{}
	_ provisioner[collect.Object]   = Grow[collect.Object]{}
	_ deprovisioner[collect.Object] = Grow[collect.Object]{}
)

// Pool places entries in a pool's buckets and grows the pool.
type Pool[E, B collect.Object] struct {
	cfg Config[E, B]
	// provisionStore and deprovisionStore are the Grower's, or nil.
	provisionStore   func(ctx context.Context, b B) error
	deprovisionStore func(ctx context.Context, b B, opts *backupstore.DeleteOptions) (*backupstore.DeleteResult, error)
}

// New checks cfg and returns its Pool.
func New[E, B collect.Object](cfg Config[E, B]) (*Pool[E, B], error) {
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"Share", cfg.Share != nil}, {"Pool", cfg.Pool != nil}, {"Member", cfg.Member != nil},
		{"Grower", cfg.Grower != nil}, {"Create", cfg.Create != nil}, {"Claims", cfg.Claims != nil}, {"Assign", cfg.Assign != nil},
	} {
		if !f.ok {
			return nil, fmt.Errorf("%w: share: pool.Config.%s is required", backupstore.ErrInvalidConfig, f.name)
		}
	}
	if cfg.DeleteEmptyAfter < 0 {
		return nil, fmt.Errorf("%w: share: pool.Config.DeleteEmptyAfter = %s: want 0 (never delete) or more", backupstore.ErrInvalidConfig, cfg.DeleteEmptyAfter)
	}
	p := &Pool[E, B]{cfg: cfg}
	if g, ok := cfg.Grower.(provisioner[B]); ok {
		p.provisionStore = g.Provision
	}
	if g, ok := cfg.Grower.(deprovisioner[B]); ok {
		p.deprovisionStore = g.Deprovision
	}
	if cfg.DeleteEmptyAfter > 0 && (p.deprovisionStore == nil || cfg.LiveEntries == nil) {
		return nil, fmt.Errorf("%w: share: pool.Config.Grower's Deprovision and pool.Config.LiveEntries are required with DeleteEmptyAfter = %s", backupstore.ErrInvalidConfig, cfg.DeleteEmptyAfter)
	}
	if p.cfg.GrowWait <= 0 {
		p.cfg.GrowWait = time.Second
	}
	return p, nil
}

var _ share.Reconciler[collect.Object, collect.Object] = (*Pool[collect.Object, collect.Object])(nil)

// ReconcileEntry places a live entry that names no bucket (Place; after
// GrowWait again while its pool grows) and reconciles every other one
// with the Share. An entry that Pool or NewBucket refuses gets the
// Admitted condition False with reason NoPool and the refusal's message.
func (p *Pool[E, B]) ReconcileEntry(ctx context.Context, e E) (time.Duration, error) {
	if _, name := p.cfg.Share.BucketOf(e); name != "" || e.GetDeletionTimestamp() != nil {
		if name != "" && e.GetDeletionTimestamp() == nil && *p.cfg.Share.Config().Prefix(e) == "" && p.provisionStore != nil {
			if refused, err := p.admissible(ctx, e); refused || err != nil {
				return 0, err
			}
		}
		return p.cfg.Share.ReconcileEntry(ctx, e)
	}
	_, err := p.Place(ctx, e)
	var np *noPoolError
	switch {
	case errors.Is(err, ErrPoolFull):
		return p.cfg.GrowWait, nil
	case errors.As(err, &np):
		// Refused until the entry changes (Pool) or the pool does
		// (NewBucket: tried again after GrowWait).
		if err := p.cfg.Share.Refuse(ctx, e.DeepCopyObject().(E), share.ReasonNoPool, np.Error(), nil); err != nil {
			return 0, err
		}
		if np.grow {
			return p.cfg.GrowWait, nil
		}
		return 0, nil
	}
	return 0, err // placed: the entry's update reconciles it again
}

// admissible provisions the bucket that e, not admitted yet, names, read
// from the API server, before the Share admits e to it: a store bucket
// that is not the bucket object's (ErrNotOwned) refuses e with reason
// StoreNotOwned, any other failure with StoreError (and the error, for a
// retry). refused says that e was refused. A bucket that is missing,
// deleted or marked for deletion is left to the Share, which refuses e.
func (p *Pool[E, B]) admissible(ctx context.Context, e E) (refused bool, err error) {
	ns, name := p.cfg.Share.BucketOf(e)
	b, err := p.cfg.Share.Config().Buckets.Get(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if b.GetDeletionTimestamp() != nil || p.deleting(b) {
		return false, nil
	}
	_, err = p.provision(ctx, b)
	n := p.cfg.Share.Config().Names
	switch {
	case errors.Is(err, ErrNotOwned):
		msg := fmt.Sprintf("%s %q: %v", n.BucketField, name, err)
		return true, p.cfg.Share.Refuse(ctx, e.DeepCopyObject().(E), ReasonStoreNotOwned, msg, nil)
	case err != nil:
		msg := fmt.Sprintf("%s %q: provision the store's bucket: %v", n.BucketField, name, err)
		return true, p.cfg.Share.Refuse(ctx, e.DeepCopyObject().(E), share.ReasonStoreError, msg, err)
	}
	return false, nil
}

// provision runs Grower.Provision for b and records its verdict on the
// object: a store bucket that is not b's (ErrNotOwned) gets
// AnnotationStoreNotOwned with the refusal and a Warning event, when they
// change; one proven b's loses the annotation. wrote says that b was
// written (its change reconciles it again).
func (p *Pool[E, B]) provision(ctx context.Context, b B) (wrote bool, err error) {
	err = p.provisionStore(ctx, b)
	was, marked := b.GetAnnotations()[AnnotationStoreNotOwned]
	switch {
	case errors.Is(err, ErrNotOwned):
		if marked && was == err.Error() {
			return false, err
		}
		if werr := p.annotate(ctx, b, map[string]string{AnnotationStoreNotOwned: err.Error()}); werr != nil {
			return false, errors.Join(err, fmt.Errorf("mark bucket %s: %w", b.GetName(), werr))
		}
		logr.FromContextOrDiscard(ctx).Info("store's bucket not the bucket's", "bucket", b.GetName(), "why", err.Error())
		p.cfg.Share.Config().Recorder.Event(b, corev1.EventTypeWarning, ReasonStoreNotOwned, err.Error())
		return true, err
	case err == nil && marked:
		if err := p.annotate(ctx, b, nil, AnnotationStoreNotOwned); err != nil {
			return false, fmt.Errorf("unmark bucket %s: %w", b.GetName(), err)
		}
		p.cfg.Share.Config().Recorder.Event(b, corev1.EventTypeNormal, ReasonStoreOwned, "the store's bucket is proven the bucket's")
		return true, nil
	}
	return false, err
}

// provisioned reads b fresh and provisions it for Place: skip says that
// b is gone, being deleted, or not the owner of its store's bucket.
func (p *Pool[E, B]) provisioned(ctx context.Context, b B) (fresh B, skip bool, err error) {
	fresh, err = p.cfg.Share.Config().Buckets.Get(ctx, b.GetNamespace(), b.GetName())
	if apierrors.IsNotFound(err) {
		return fresh, true, nil
	}
	if err != nil {
		return fresh, false, fmt.Errorf("read bucket %s: %w", b.GetName(), err)
	}
	if fresh.GetDeletionTimestamp() != nil || p.deleting(fresh) {
		return fresh, true, nil
	}
	wrote, err := p.provision(ctx, fresh)
	switch {
	case errors.Is(err, ErrNotOwned):
		return fresh, true, nil
	case err != nil:
		logr.FromContextOrDiscard(ctx).Info("bucket not provisioned; placing anyway, the admission reports it", "bucket", b.GetName(), "error", err.Error())
	case wrote:
		// Unmarked: read again for the resourceVersion of the claim.
		return p.provisioned(ctx, fresh)
	}
	return fresh, false, nil
}

func (p *Pool[E, B]) notOwned(b B) bool {
	_, ok := b.GetAnnotations()[AnnotationStoreNotOwned]
	return ok
}

// noPoolError is a refusal of Config.Pool (grow false) or
// Grower.NewBucket (grow true).
type noPoolError struct {
	err  error
	grow bool
}

func (e *noPoolError) Error() string { return e.err.Error() }
func (e *noPoolError) Unwrap() error { return e.err }

// ReconcileBucket deletes a bucket empty for DeleteEmptyAfter
// (DeleteEmpty), frees the places of gone entries (Release), provisions a
// live bucket's store (Provision) and reconciles the bucket with the
// Share. A bucket stamped empty or marked for deletion is not
// provisioned: a cache's copy from before its deletion would create its
// store's bucket again (a cache shows a process the versions in order, so
// once a stamp was seen, no older copy comes).
func (p *Pool[E, B]) ReconcileBucket(ctx context.Context, b B) (time.Duration, error) {
	d, wrote, err := p.deleteEmpty(ctx, b)
	if err != nil || wrote {
		return 0, err // the write reconciles it again
	}
	if wrote, err := p.Release(ctx, b); err != nil || wrote {
		return 0, err // the status write reconciles it again
	}
	if _, empty := emptySince(b); p.provisionStore != nil && b.GetDeletionTimestamp() == nil && !p.deleting(b) && !empty {
		wrote, err := p.provision(ctx, b)
		if wrote && (err == nil || errors.Is(err, ErrNotOwned)) {
			return 0, nil // the write reconciles it again
		}
		if err != nil && !errors.Is(err, ErrNotOwned) { // not owned: recorded, and kept as it is
			return 0, fmt.Errorf("provision bucket %s: %w", b.GetName(), err)
		}
	}
	after, err := p.cfg.Share.ReconcileBucket(ctx, b)
	if d.After > 0 && (after == 0 || d.After < after) {
		after = d.After
	}
	return after, err
}

// Waiting is the Share's.
func (p *Pool[E, B]) Waiting(ctx context.Context, b B) ([]E, error) {
	return p.cfg.Share.Waiting(ctx, b)
}

// BucketOf is the Share's.
func (p *Pool[E, B]) BucketOf(e E) (namespace, name string) { return p.cfg.Share.BucketOf(e) }

// Place gives entry e, which names no bucket yet, a place in its pool:
// the first bucket by name that is neither being deleted nor marked for
// deletion (AnnotationDeleting) nor marked as not owning its store's
// bucket (AnnotationStoreNotOwned), and whose claims are below its limit,
// takes e's name in its claims (a status write that fails on a conflict,
// so also when the bucket was marked meanwhile), then e records the
// bucket (Assign, an update). An entry already claimed by a bucket (a
// placement whose entry update was lost) is assigned that bucket again.
// When every bucket is full, Place creates a new bucket (NewBucket with
// the first number from the count of buckets up whose name no bucket
// object has, of the pool or not) and returns ErrPoolFull; place e again
// when that bucket changes. An object of that name found only by the
// creation (AlreadyExists) counts as the pool's growth if it is a member
// of the pool (another placer created it); one that is not (an unrelated
// object named like the pool's next bucket) is never taken for the
// pool's: Place tries the next number. It returns the bucket's name.
func (p *Pool[E, B]) Place(ctx context.Context, e E) (string, error) {
	pool, err := p.cfg.Pool(e)
	if err != nil {
		return "", &noPoolError{err: fmt.Errorf("entry %s has no pool: %w", e.GetName(), err)}
	}
	all, err := p.cfg.Share.Config().Buckets.List(ctx, "")
	if err != nil {
		return "", err
	}
	var members []B
	for _, b := range all {
		if p.cfg.Member(b) == pool {
			members = append(members, b)
		}
	}
	slices.SortFunc(members, func(a, b B) int { return strings.Compare(a.GetName(), b.GetName()) })
	for _, b := range members {
		if slices.Contains(*p.cfg.Claims(b), claimKey(e)) {
			return b.GetName(), p.assign(ctx, e, b)
		}
	}
	b, ok, err := p.claimPlace(ctx, e, pool, members)
	if err != nil || ok {
		return b, err
	}
	return "", p.grow(ctx, e, pool, all, members)
}

// claimPlace claims a place for e in the first member of the pool, by
// name, that takes entries and has room, and assigns it. It reports false
// when no member has room.
func (p *Pool[E, B]) claimPlace(ctx context.Context, e E, pool string, members []B) (string, bool, error) {
	var err error
	for _, b := range members {
		if b.GetDeletionTimestamp() != nil || p.deleting(b) || p.notOwned(b) {
			continue
		}
		if limit := p.cfg.Share.Config().Limit(b); limit > 0 && len(*p.cfg.Claims(b)) >= limit {
			continue
		}
		if p.provisionStore != nil {
			// Proven the owner of its store's bucket before a place is
			// taken, on a fresh read: a bucket grown into another's store
			// bucket is skipped (and marked), and the pool grows past it,
			// rather than an entry being placed where it is never
			// admitted. Any other failure is the admission's to report.
			var skip bool
			if b, skip, err = p.provisioned(ctx, b); err != nil || skip {
				if err != nil {
					return "", false, err
				}
				continue
			}
			// The fresh read may hold the entry's claim, written by
			// another placer since the list: that place is the entry's.
			if slices.Contains(*p.cfg.Claims(b), claimKey(e)) {
				return b.GetName(), true, p.assign(ctx, e, b)
			}
			if limit := p.cfg.Share.Config().Limit(b); limit > 0 && len(*p.cfg.Claims(b)) >= limit {
				continue
			}
		}
		b = b.DeepCopyObject().(B)
		claims := p.cfg.Claims(b)
		*claims = append(*claims, claimKey(e))
		if err := p.cfg.Share.Config().Buckets.UpdateStatus(ctx, b); err != nil {
			return "", false, fmt.Errorf("claim a place in bucket %s for entry %s: %w", b.GetName(), e.GetName(), err)
		}
		logr.FromContextOrDiscard(ctx).Info("placed", "entry", e.GetName(), "bucket", b.GetName(), "pool", pool)
		return b.GetName(), true, p.assign(ctx, e, b)
	}
	return "", false, nil
}

// grow creates the pool's next bucket object for e, and returns ErrPoolFull
// naming it: e is placed on a later call, once the bucket is ready.
func (p *Pool[E, B]) grow(ctx context.Context, e E, pool string, all, members []B) error {
	// Deleted buckets leave gaps in the numbers: the next is the first
	// from the count up that no bucket object has, the same for every
	// placer with the same view. An object that is not the pool's member
	// is skipped as well: it is not the pool's growth, and its name can
	// never be.
	taken := map[string]bool{}
	for _, b := range all {
		taken[b.GetNamespace()+"/"+b.GetName()] = true
	}
	n, skipped := len(members), 0
	for {
		next, err := p.next(pool, &n, members, taken)
		if err != nil {
			return err
		}
		a := maps.Clone(next.GetAnnotations())
		if a == nil {
			a = map[string]string{}
		}
		a[AnnotationCreatedBy] = pool
		next.SetAnnotations(a)
		err = p.cfg.Create(ctx, next)
		if apierrors.IsAlreadyExists(err) {
			// Not in the list: a placer created it a moment ago, or an
			// unrelated object has the name. Only a member is growth.
			existing, gerr := p.cfg.Share.Config().Buckets.Get(ctx, next.GetNamespace(), next.GetName())
			if gerr != nil {
				return fmt.Errorf("pool %q: bucket %s exists: %w", pool, next.GetName(), gerr)
			}
			if p.cfg.Member(existing) != pool {
				taken[next.GetNamespace()+"/"+next.GetName()] = true
				if skipped++; skipped > len(all)+1 {
					return &noPoolError{err: fmt.Errorf("pool %q cannot grow: bucket %s and %d more names the pool gives are taken by objects of another pool or none", pool, next.GetName(), skipped-1), grow: true}
				}
				logr.FromContextOrDiscard(ctx).Info("pool's next name taken by another object", "pool", pool, "bucket", next.GetName(), "pool of the object", p.cfg.Member(existing))
				continue
			}
			err = nil
		}
		if err != nil {
			return fmt.Errorf("pool %q: create bucket %s: %w", pool, next.GetName(), err)
		}
		logr.FromContextOrDiscard(ctx).Info("pool grown", "pool", pool, "bucket", next.GetName(), "for", e.GetName())
		return fmt.Errorf("%w: pool %q, %d buckets; bucket %s created for entry %s", ErrPoolFull, pool, len(members), next.GetName(), e.GetName())
	}
}

// next returns the pool's next bucket (NewBucket) after number *n whose
// name no object in taken has, and sets *n to its number.
func (p *Pool[E, B]) next(pool string, n *int, members []B, taken map[string]bool) (B, error) {
	for tries := 0; ; tries++ {
		*n++
		next, err := p.cfg.Grower.NewBucket(pool, *n)
		if err != nil {
			return next, &noPoolError{err: fmt.Errorf("pool %q cannot grow: %w", pool, err), grow: true}
		}
		if !taken[next.GetNamespace()+"/"+next.GetName()] {
			return next, nil
		}
		if tries > len(members)+len(taken) { // distinct names for distinct numbers find a free one sooner
			return next, fmt.Errorf("%w: share: Grower.NewBucket(%q, %d) = %s, a bucket that exists: it must name the n-th bucket after n", backupstore.ErrInvalidConfig, pool, *n, next.GetName())
		}
	}
}

func (p *Pool[E, B]) assign(ctx context.Context, e E, b B) error {
	e = e.DeepCopyObject().(E)
	p.cfg.Assign(e, b.GetNamespace(), b.GetName())
	if err := p.cfg.Share.Config().Entries.Update(ctx, e); err != nil {
		return fmt.Errorf("assign bucket %s to entry %s: %w", b.GetName(), e.GetName(), err)
	}
	return nil
}

// claimKey is how a bucket's claims name an entry: namespace/name, or the
// name of a cluster-scoped entry.
func claimKey(e collect.Object) string {
	if e.GetNamespace() == "" {
		return e.GetName()
	}
	return e.GetNamespace() + "/" + e.GetName()
}

// Release removes from bucket b's claims the entries that are gone, with
// b's resourceVersion; it reports whether it wrote. An entry missing from
// the (cached) list is read from the API server before its place goes: a
// cache that has not seen a new entry yet must not free its place.
func (p *Pool[E, B]) Release(ctx context.Context, b B) (bool, error) {
	all, err := p.cfg.Share.Config().Entries.List(ctx, "")
	if err != nil {
		return false, err
	}
	present := map[string]bool{}
	for _, e := range all {
		present[claimKey(e)] = true
	}
	b = b.DeepCopyObject().(B)
	claims := p.cfg.Claims(b)
	var kept []string
	for _, c := range *claims {
		if !present[c] {
			ns, name, found := strings.Cut(c, "/")
			if !found {
				ns, name = "", c
			}
			_, err := p.cfg.Share.Config().Entries.Get(ctx, ns, name)
			if err == nil {
				present[c] = true
			} else if !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("release places in bucket %s: read entry %s: %w", b.GetName(), c, err)
			}
		}
		if present[c] {
			kept = append(kept, c)
		}
	}
	if len(kept) == len(*claims) {
		return false, nil
	}
	*claims = kept
	if err := p.cfg.Share.Config().Buckets.UpdateStatus(ctx, b); err != nil {
		return false, fmt.Errorf("release places in bucket %s: %w", b.GetName(), err)
	}
	return true, nil
}
