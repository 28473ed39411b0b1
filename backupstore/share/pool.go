package share

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/internal/storeerr"
)

// ErrPoolFull is returned by Place when a pool's buckets are full and a
// new bucket was asked for: place the entry again once it is there.
var ErrPoolFull = storeerr.ErrPoolFull

// PoolConfig says how entries that name no bucket are placed in a pool of
// buckets (Gardener's buckets per provider and region, each with the
// quota's limit of entries), and how the pool grows.
type PoolConfig[E, B collect.Object] struct {
	// Share gives the entries, the buckets and each bucket's Limit.
	Share *Share[E, B]
	// Pool names the pool an entry is placed in ("aws/eu-west-1"), or an
	// error that says why it has none (an unknown provider). Required.
	Pool func(E) (string, error)
	// Member names the pool a bucket belongs to; "" for none. Required.
	Member func(B) string
	// NewBucket builds the n-th bucket (n from 1) of a pool, with its
	// name, its Member and its Limit; an error refuses (a limit of 0).
	// The name must follow from pool and n alone: two replicas that grow
	// the pool at once then create the same object, and the second gets
	// AlreadyExists. Required.
	NewBucket func(pool string, n int) (B, error)
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
	// Provision, if set, creates the store's bucket behind a live bucket
	// object (backupstore.CreateBucket), before its entries are admitted;
	// it is called on every reconcile of the bucket and must succeed when
	// the bucket exists.
	Provision func(ctx context.Context, b B) error
	// GrowWait is when an entry is placed again after its pool grew;
	// default 1s.
	GrowWait time.Duration
}

// Pool places entries in a pool's buckets and grows the pool.
type Pool[E, B collect.Object] struct {
	cfg PoolConfig[E, B]
}

// NewPool checks cfg and returns its Pool.
func NewPool[E, B collect.Object](cfg PoolConfig[E, B]) (*Pool[E, B], error) {
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"Share", cfg.Share != nil}, {"Pool", cfg.Pool != nil}, {"Member", cfg.Member != nil},
		{"NewBucket", cfg.NewBucket != nil}, {"Create", cfg.Create != nil}, {"Claims", cfg.Claims != nil}, {"Assign", cfg.Assign != nil},
	} {
		if !f.ok {
			return nil, fmt.Errorf("%w: share: PoolConfig.%s is required", ErrInvalidConfig, f.name)
		}
	}
	if cfg.GrowWait <= 0 {
		cfg.GrowWait = time.Second
	}
	return &Pool[E, B]{cfg: cfg}, nil
}

// Reconciler is what crt/backups.Share runs: a Share, or a Pool over one.
type Reconciler[E, B collect.Object] interface {
	ReconcileEntry(ctx context.Context, e E) (time.Duration, error)
	ReconcileBucket(ctx context.Context, b B) (time.Duration, error)
	Waiting(ctx context.Context, b B) ([]E, error)
	BucketOf(e E) (namespace, name string)
}

var (
	_ Reconciler[collect.Object, collect.Object] = (*Share[collect.Object, collect.Object])(nil)
	_ Reconciler[collect.Object, collect.Object] = (*Pool[collect.Object, collect.Object])(nil)
)

// ReconcileEntry places a live entry that names no bucket (Place; after
// GrowWait again while its pool grows) and reconciles every other one
// with the Share. An entry that Pool or NewBucket refuses gets the
// Admitted condition False with reason NoPool and the refusal's message.
func (p *Pool[E, B]) ReconcileEntry(ctx context.Context, e E) (time.Duration, error) {
	if _, name := p.cfg.Share.BucketOf(e); name != "" || e.GetDeletionTimestamp() != nil {
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
		if err := p.cfg.Share.refuse(ctx, e.DeepCopyObject().(E), ReasonNoPool, np.Error(), nil); err != nil {
			return 0, err
		}
		if np.grow {
			return p.cfg.GrowWait, nil
		}
		return 0, nil
	}
	return 0, err // placed: the entry's update reconciles it again
}

// noPoolError is a refusal of PoolConfig.Pool (grow false) or
// PoolConfig.NewBucket (grow true).
type noPoolError struct {
	err  error
	grow bool
}

func (e *noPoolError) Error() string { return e.err.Error() }
func (e *noPoolError) Unwrap() error { return e.err }

// ReconcileBucket frees the places of gone entries (Release), provisions
// a live bucket's store (Provision) and reconciles the bucket with the
// Share.
func (p *Pool[E, B]) ReconcileBucket(ctx context.Context, b B) (time.Duration, error) {
	if wrote, err := p.Release(ctx, b); err != nil || wrote {
		return 0, err // the status write reconciles it again
	}
	if p.cfg.Provision != nil && b.GetDeletionTimestamp() == nil {
		if err := p.cfg.Provision(ctx, b); err != nil {
			return 0, fmt.Errorf("provision bucket %s: %w", b.GetName(), err)
		}
	}
	return p.cfg.Share.ReconcileBucket(ctx, b)
}

// Waiting is the Share's.
func (p *Pool[E, B]) Waiting(ctx context.Context, b B) ([]E, error) {
	return p.cfg.Share.Waiting(ctx, b)
}

// BucketOf is the Share's.
func (p *Pool[E, B]) BucketOf(e E) (namespace, name string) { return p.cfg.Share.BucketOf(e) }

// Place gives entry e, which names no bucket yet, a place in its pool:
// the first bucket by name that is not being deleted and whose claims are
// below its limit takes e's name in its claims (a status write that
// fails on a conflict), then e records the bucket (Assign, an update). An
// entry already claimed by a bucket (a placement whose entry update was
// lost) is assigned that bucket again. When every bucket is full, Place
// creates the pool's next bucket (NewBucket) and returns ErrPoolFull;
// place e again when that bucket changes. It returns the bucket's name.
func (p *Pool[E, B]) Place(ctx context.Context, e E) (string, error) {
	pool, err := p.cfg.Pool(e)
	if err != nil {
		return "", &noPoolError{err: fmt.Errorf("entry %s has no pool: %w", e.GetName(), err)}
	}
	all, err := p.cfg.Share.cfg.Buckets.List(ctx, "")
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
	for _, b := range members {
		if b.GetDeletionTimestamp() != nil {
			continue
		}
		if limit := p.cfg.Share.cfg.Limit(b); limit > 0 && len(*p.cfg.Claims(b)) >= limit {
			continue
		}
		b = b.DeepCopyObject().(B)
		claims := p.cfg.Claims(b)
		*claims = append(*claims, claimKey(e))
		if err := p.cfg.Share.cfg.Buckets.UpdateStatus(ctx, b); err != nil {
			return "", fmt.Errorf("claim a place in bucket %s for entry %s: %w", b.GetName(), e.GetName(), err)
		}
		logr.FromContextOrDiscard(ctx).Info("placed", "entry", e.GetName(), "bucket", b.GetName(), "pool", pool)
		return b.GetName(), p.assign(ctx, e, b)
	}
	next, err := p.cfg.NewBucket(pool, len(members)+1)
	if err != nil {
		return "", &noPoolError{err: fmt.Errorf("pool %q cannot grow: %w", pool, err), grow: true}
	}
	if err := p.cfg.Create(ctx, next); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("pool %q: create bucket %s: %w", pool, next.GetName(), err)
	}
	logr.FromContextOrDiscard(ctx).Info("pool grown", "pool", pool, "bucket", next.GetName(), "for", e.GetName())
	return "", fmt.Errorf("%w: pool %q, %d buckets; bucket %s created for entry %s", ErrPoolFull, pool, len(members), next.GetName(), e.GetName())
}

func (p *Pool[E, B]) assign(ctx context.Context, e E, b B) error {
	e = e.DeepCopyObject().(E)
	p.cfg.Assign(e, b.GetNamespace(), b.GetName())
	if err := p.cfg.Share.cfg.Entries.Update(ctx, e); err != nil {
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
	all, err := p.cfg.Share.cfg.Entries.List(ctx, "")
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
			_, err := p.cfg.Share.cfg.Entries.Get(ctx, ns, name)
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
	if err := p.cfg.Share.cfg.Buckets.UpdateStatus(ctx, b); err != nil {
		return false, fmt.Errorf("release places in bucket %s: %w", b.GetName(), err)
	}
	return true, nil
}
