package main

import (
	"context"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	// The stores a bucket URL may name: each provider links its cloud's SDK.
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore" // azblob://
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"   // gs://
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"    // s3://
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
)

// controllerOptions are the flags of the real controller.
type controllerOptions struct {
	grace  time.Duration
	dryRun bool
	// Tests only: wrap wraps the API access to inject faults.
	wrap func(cluster) cluster
}

// scheme holds the types the manager's client reads: Kubernetes' own and
// the buckets and entries.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(api.AddToScheme(scheme))
}

// setupControllers adds two controllers to mgr, each with one worker (the
// default; admissions must not race, see controller):
//
//   - "backupentry" reconciles an entry when it appears or its spec or
//     metadata change, not when only its status does: the controller
//     writes the status, and a failing deletion would otherwise retry at
//     once instead of with backoff. It also reconciles the entries waiting
//     for a place in a bucket when the bucket changes and has room.
//   - "backupbucket" reconciles a bucket when it changes, and when an entry
//     that names it changes, to count its entries.
func setupControllers(mgr ctrl.Manager, o controllerOptions) error {
	var cl cluster = apiCluster{client: mgr.GetClient(), live: mgr.GetAPIReader()}
	if o.wrap != nil {
		cl = o.wrap(cl)
	}
	secrets, events := crt.Secrets(mgr.GetAPIReader()), crt.Events(mgr.GetEventRecorder("backup-entry"))
	entries, err := collect.New(entryConfig(cl, secrets, events, clock.RealClock{}, o.grace, o.dryRun))
	if err != nil {
		return err
	}
	c := &controller{cluster: cl, events: events, clock: clock.RealClock{}, entries: entries}
	notStatusOnly := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !statusOnlyChange(e.ObjectOld, e.ObjectNew) }}
	waitingFor := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		entries, err := cl.Entries(ctx)
		if err != nil {
			logf.FromContext(ctx).Error(err, "list entries", "bucket", obj.GetName())
			return nil
		}
		return requests(refusedEntries(obj.(*api.BackupBucket), entries)...)
	})
	err = ctrl.NewControllerManagedBy(mgr).Named("backupentry").
		For(&api.BackupEntry{}, builder.WithPredicates(notStatusOnly)).
		Watches(&api.BackupBucket{}, waitingFor).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			after, err := c.reconcileEntry(ctx, req.Name)
			return crt.Result(ctx, after, err)
		}))
	if err != nil {
		return err
	}
	bucketOf := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		return requests(obj.(*api.BackupEntry).Spec.BucketName)
	})
	return ctrl.NewControllerManagedBy(mgr).Named("backupbucket").
		For(&api.BackupBucket{}).
		Watches(&api.BackupEntry{}, bucketOf).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			after, err := c.reconcileBucket(ctx, req.Name)
			return crt.Result(ctx, after, err)
		}))
}

// requests are the reconcile requests of cluster-scoped objects by name.
func requests(names ...string) []reconcile.Request {
	var out []reconcile.Request
	for _, n := range names {
		if n != "" {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n}})
		}
	}
	return out
}

// statusOnlyChange reports whether an update changed nothing but the
// status. A resync (same resourceVersion) is not one.
func statusOnlyChange(old, cur client.Object) bool {
	if old.GetResourceVersion() == cur.GetResourceVersion() {
		return false
	}
	return old.GetGeneration() == cur.GetGeneration() &&
		equality.Semantic.DeepEqual(old.GetDeletionTimestamp(), cur.GetDeletionTimestamp()) &&
		slices.Equal(old.GetFinalizers(), cur.GetFinalizers()) &&
		maps.Equal(old.GetAnnotations(), cur.GetAnnotations())
}

// apiCluster reads from the manager's cache, except GetEntry, which reads
// the API server (the manager's API reader), and writes through the
// manager's client. Updates carry the resourceVersion of the object read.
type apiCluster struct {
	client client.Client
	live   client.Reader
}

func (a apiCluster) Entry(ctx context.Context, name string) (*api.BackupEntry, error) {
	return get[api.BackupEntry](ctx, a.client, name)
}

func (a apiCluster) GetEntry(ctx context.Context, name string) (*api.BackupEntry, error) {
	return get[api.BackupEntry](ctx, a.live, name)
}

func (a apiCluster) Bucket(ctx context.Context, name string) (*api.BackupBucket, error) {
	return get[api.BackupBucket](ctx, a.client, name)
}

func (a apiCluster) Entries(ctx context.Context) ([]*api.BackupEntry, error) {
	var list api.BackupEntryList
	if err := a.client.List(ctx, &list); err != nil {
		return nil, err
	}
	out := make([]*api.BackupEntry, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (a apiCluster) UpdateEntry(ctx context.Context, e *api.BackupEntry) (*api.BackupEntry, error) {
	e = e.DeepCopy()
	return e, a.client.Update(ctx, e)
}

func (a apiCluster) UpdateEntryStatus(ctx context.Context, e *api.BackupEntry) (*api.BackupEntry, error) {
	e = e.DeepCopy()
	return e, a.client.Status().Update(ctx, e)
}

func (a apiCluster) UpdateBucket(ctx context.Context, b *api.BackupBucket) (*api.BackupBucket, error) {
	b = b.DeepCopy()
	return b, a.client.Update(ctx, b)
}

func (a apiCluster) UpdateBucketStatus(ctx context.Context, b *api.BackupBucket) (*api.BackupBucket, error) {
	b = b.DeepCopy()
	return b, a.client.Status().Update(ctx, b)
}

// get reads the cluster-scoped object name; nil with the error if that
// fails.
func get[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, r client.Reader, name string) (*T, error) {
	obj := PT(new(T))
	if err := r.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		return nil, err
	}
	return obj, nil
}
