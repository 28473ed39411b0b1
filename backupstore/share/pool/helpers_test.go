package pool_test

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/types"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
)

type backup = *testbackup.Backup

// noObjects is never called.
type noObjects struct{}

var errUnused = errors.New("not used")

func (noObjects) List(context.Context, string) ([]backup, error)      { return nil, errUnused }
func (noObjects) Get(context.Context, string, string) (backup, error) { return nil, errUnused }
func (noObjects) UpdateStatus(context.Context, backup) error          { return errUnused }
func (noObjects) Update(context.Context, backup) error                { return errUnused }
func (noObjects) Delete(context.Context, string, string, types.UID, string) error {
	return errUnused
}

// growerFuncs is a pool.Grower made of functions: grower returns one that
// has Provision and Deprovision only when they are set, as the Pool finds
// them at run time.
type growerFuncs struct {
	NewBucket   func(pool string, n int) (backup, error)
	Provision   func(ctx context.Context, b backup) error
	Deprovision func(ctx context.Context, b backup, opts *backupstore.DeleteOptions) (*backupstore.DeleteResult, error)
}

type newBucketOnly struct{ f growerFuncs }

func (g newBucketOnly) NewBucket(pool string, n int) (backup, error) { return g.f.NewBucket(pool, n) }

type withProvision struct{ newBucketOnly }

func (g withProvision) Provision(ctx context.Context, b backup) error { return g.f.Provision(ctx, b) }

type withDeprovision struct{ newBucketOnly }

func (g withDeprovision) Deprovision(ctx context.Context, b backup, opts *backupstore.DeleteOptions) (*backupstore.DeleteResult, error) {
	return g.f.Deprovision(ctx, b, opts)
}

type withBoth struct {
	withProvision
	d withDeprovision
}

func (g withBoth) Deprovision(ctx context.Context, b backup, opts *backupstore.DeleteOptions) (*backupstore.DeleteResult, error) {
	return g.d.Deprovision(ctx, b, opts)
}

func (f growerFuncs) grower() pool.Grower[backup] {
	n := newBucketOnly{f}
	switch {
	case f.Provision != nil && f.Deprovision != nil:
		return withBoth{withProvision{n}, withDeprovision{n}}
	case f.Provision != nil:
		return withProvision{n}
	case f.Deprovision != nil:
		return withDeprovision{n}
	}
	return pool.GrowerFunc[backup](f.NewBucket)
}

func prefixOf(e backup) string {
	if e == nil {
		return "(gone)"
	}
	return e.Status.Prefix
}
