package pool_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
	"github.com/groundskeeper-io/groundskeeper/testenv"
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

// controlPlane starts a control plane with the test backup kind installed
// and a namespace for bucket objects beside the test's; scheme knows the
// kind. It skips the test under -short.
func controlPlane(t *testing.T) (k *testenv.Kubernetes, scheme *runtime.Scheme, bucketNS string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	k = testenv.StartKubernetes(t)
	if _, err := testbackup.Install(k.Config); err != nil {
		t.Fatal(err)
	}
	scheme = runtime.NewScheme()
	if err := testbackup.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	bucketNS = k.Namespace + "-buckets"
	if _, err := k.Client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bucketNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return k, scheme, bucketNS
}
