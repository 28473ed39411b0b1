package share

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
)

// Grow is a PoolConfig's NewBucket and Provision for bucket objects that
// name their store's bucket by a URL and its credentials by a Secret: a
// pool's next bucket is made from its first member (by name, the one an
// administrator made), named "<pool>-<n>" ('/' in the pool's name as
// '-'), its URL naming a store bucket of that name
// (backupstore.BucketURL); Provision creates a member's store bucket
// (backupstore.CreateBucket, nothing to do when it exists), and
// Deprovision deletes it (backupstore.DeleteBucket).
type Grow[B collect.Object] struct {
	// Buckets lists the pool's members (a cache). Required.
	Buckets collect.Objects[B]
	// Member names the pool a bucket belongs to (PoolConfig.Member).
	// Required.
	Member func(B) string
	// Store is a bucket's URL and the namespace and name of its Secret
	// ("" for none: file://, mem://). Required.
	Store func(B) (url, secretNamespace, secretName string)
	// New builds the bucket object name with url, in the pool of first
	// (its spec, without first's metadata and status). Required.
	New func(first B, name, url string) B
	// Secrets reads the Secrets. Required.
	Secrets backupstore.SecretGetter
}

// NewBucket is PoolConfig.NewBucket: the n-th bucket of pool, made from
// its first. A pool without a member, or whose first's URL names no
// bucket, cannot grow: the error says so.
func (g Grow[B]) NewBucket(pool string, n int) (B, error) {
	var zero B
	// PoolConfig.NewBucket takes no context: the list is a cache read.
	all, err := g.Buckets.List(context.Background(), "")
	if err != nil {
		return zero, err
	}
	var members []B
	for _, b := range all {
		if g.Member(b) == pool {
			members = append(members, b)
		}
	}
	if len(members) == 0 {
		return zero, fmt.Errorf("no bucket of the pool to make its next from: create the pool's first")
	}
	first := slices.MinFunc(members, func(a, b B) int { return strings.Compare(a.GetName(), b.GetName()) })
	name := fmt.Sprintf("%s-%d", strings.ReplaceAll(strings.Trim(pool, "/"), "/", "-"), n)
	rawURL, _, _ := g.Store(first)
	u, err := backupstore.BucketURL(rawURL, name)
	if err != nil {
		return zero, fmt.Errorf("the pool's first bucket %s: %w", first.GetName(), err)
	}
	return g.New(first, name, u), nil
}

// Provision is PoolConfig.Provision: it creates the store's bucket of a
// pool's member, with the credentials of its Secret; a bucket outside any
// pool is the administrator's to create.
func (g Grow[B]) Provision(ctx context.Context, b B) error {
	if g.Member(b) == "" {
		return nil
	}
	rawURL, creds, err := g.store(ctx, b)
	if err != nil {
		return err
	}
	return backupstore.CreateBucket(ctx, rawURL, creds)
}

// Deprovision is PoolConfig.Deprovision: it deletes the store's bucket of a
// pool's member, its data first (backupstore.DeleteBucket, with opts), with
// the credentials of its Secret. A bucket outside any pool is refused: it
// is the administrator's.
func (g Grow[B]) Deprovision(ctx context.Context, b B, opts *backupstore.DeleteOptions) (*backupstore.DeleteResult, error) {
	if g.Member(b) == "" {
		return nil, fmt.Errorf("%w: bucket %s belongs to no pool: not deleted", backupstore.ErrInvalidConfig, b.GetName())
	}
	rawURL, creds, err := g.store(ctx, b)
	if err != nil {
		return nil, err
	}
	return backupstore.DeleteBucket(ctx, rawURL, creds, opts)
}

// store returns the URL of b's store bucket and the credentials of its
// Secret (nil without one).
func (g Grow[B]) store(ctx context.Context, b B) (string, *backupstore.Credentials, error) {
	rawURL, ns, name := g.Store(b)
	if name == "" {
		return rawURL, nil, nil
	}
	scheme, err := backupstore.Scheme(rawURL)
	if err != nil {
		return "", nil, err
	}
	creds, err := backupstore.LoadCredentials(ctx, g.Secrets, ns, name, scheme)
	return rawURL, creds, err
}
