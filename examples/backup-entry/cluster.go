package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
)

// controllerOptions are the flags of the real controller.
type controllerOptions struct {
	grace  time.Duration
	dryRun bool
	// Tests only: wrap wraps the API access to inject faults;
	// leaseNamespace runs the controller under leader election, as run does.
	wrap           func(cluster) cluster
	leaseNamespace string
}

// runController reconciles every BackupEntry and BackupBucket of the
// cluster until ctx ends, with one worker (see controller).
func runController(ctx context.Context, cfg *rest.Config, o controllerOptions) error {
	log := logr.FromContextOrDiscard(ctx)
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	defer broadcaster.Shutdown()

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "backup-entry"})
	factory := dynamicinformer.NewDynamicSharedInformerFactory(client, 10*time.Minute)
	entries, buckets := factory.ForResource(api.EntryResource), factory.ForResource(api.BucketResource)
	// An entry is reconciled when it appears or its spec or metadata change,
	// not when only its status does: the controller writes the status, and
	// a failing deletion would otherwise retry at once instead of with
	// backoff. Its bucket is reconciled on every change, to count it.
	onEntry := func(old, obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		if o, ok := old.(*unstructured.Unstructured); !ok || !statusOnlyChange(o, u) {
			queue.Add(entryKey(u.GetName()))
		}
		if b, _, _ := unstructured.NestedString(u.Object, "spec", "bucketName"); b != "" {
			queue.Add(bucketKey(b))
		}
	}
	onBucket := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			queue.Add(bucketKey(u.GetName()))
		}
	}
	if _, err := entries.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { onEntry(nil, obj) }, UpdateFunc: onEntry, DeleteFunc: func(obj any) { onEntry(nil, obj) },
	}); err != nil {
		return err
	}
	if _, err := buckets.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onBucket, UpdateFunc: func(_, obj any) { onBucket(obj) }, DeleteFunc: onBucket,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), entries.Informer().HasSynced, buckets.Informer().HasSynced) {
		return fmt.Errorf("waiting for the informers: %w", ctx.Err())
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()

	var cl cluster = &apiCluster{client: client, entries: entries.Lister(), buckets: buckets.Lister()}
	if o.wrap != nil {
		cl = o.wrap(cl)
	}
	c := &controller{
		cluster: cl,
		open:    secretStoreOpener(backupstore.SecretsFrom(cs.CoreV1())),
		events:  broadcaster.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: "backup-entry"}),
		clock:   clock.RealClock{},
		grace:   o.grace,
		dryRun:  o.dryRun,
		enqueue: queue.Add,
	}
	log.Info("controller started", "deletionGracePeriod", o.grace.String(), "dryRun", o.dryRun)
	for {
		key, quit := queue.Get()
		if quit {
			return nil
		}
		after, err := c.reconcile(ctx, key)
		switch {
		case err != nil && ctx.Err() == nil:
			if apierrors.IsConflict(err) { // a stale cache; read again
				log.V(1).Info("conflict, retrying", "key", key, "error", err.Error())
			} else {
				log.Error(err, "reconcile failed", "key", key)
			}
			queue.AddRateLimited(key)
		case after > 0:
			queue.Forget(key)
			queue.AddAfter(key, after)
		default:
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

// statusOnlyChange reports whether an update changed nothing but the
// status. A resync (same resourceVersion) is not one.
func statusOnlyChange(old, cur *unstructured.Unstructured) bool {
	if old.GetResourceVersion() == cur.GetResourceVersion() {
		return false
	}
	return old.GetGeneration() == cur.GetGeneration() &&
		equality.Semantic.DeepEqual(old.GetDeletionTimestamp(), cur.GetDeletionTimestamp()) &&
		slices.Equal(old.GetFinalizers(), cur.GetFinalizers()) &&
		maps.Equal(old.GetAnnotations(), cur.GetAnnotations())
}

// secretStoreOpener opens a BackupBucket's store with the credentials in its
// spec.secretRef, read afresh each time so that a rotated Secret is used.
func secretStoreOpener(secrets backupstore.SecretGetter) storeOpener {
	return func(ctx context.Context, b *api.BackupBucket) (*blob.Bucket, func(), error) {
		scheme, err := backupstore.Scheme(b.Spec.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("BackupBucket %q spec.url: %w", b.Name, err)
		}
		var creds *backupstore.Credentials
		if scheme != "file" && scheme != "mem" {
			ref := b.Spec.SecretRef
			if ref == nil {
				return nil, nil, fmt.Errorf("BackupBucket %q: spec.secretRef is required for %s:// URLs", b.Name, scheme)
			}
			if creds, err = backupstore.LoadCredentials(ctx, secrets, ref.Namespace, ref.Name, scheme); err != nil {
				return nil, nil, err
			}
		}
		store, err := backupstore.OpenBucket(ctx, b.Spec.URL, creds)
		if err != nil {
			return nil, nil, fmt.Errorf("BackupBucket %q: %w", b.Name, err)
		}
		return store, func() { store.Close() }, nil
	}
}

// apiCluster reads from the informers' caches and writes through the
// dynamic client. Updates carry the resourceVersion of the object read.
type apiCluster struct {
	client           dynamic.Interface
	entries, buckets cache.GenericLister
}

func (a *apiCluster) Entry(name string) (*api.BackupEntry, error) {
	obj, err := a.entries.Get(name)
	if err != nil {
		return nil, err
	}
	return decode[api.BackupEntry](obj)
}

func (a *apiCluster) GetEntry(ctx context.Context, name string) (*api.BackupEntry, error) {
	u, err := a.client.Resource(api.EntryResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return decode[api.BackupEntry](u)
}

func (a *apiCluster) Entries() ([]*api.BackupEntry, error) {
	objs, err := a.entries.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*api.BackupEntry, 0, len(objs))
	for _, o := range objs {
		e, err := decode[api.BackupEntry](o)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func (a *apiCluster) Bucket(name string) (*api.BackupBucket, error) {
	obj, err := a.buckets.Get(name)
	if err != nil {
		return nil, err
	}
	return decode[api.BackupBucket](obj)
}

func (a *apiCluster) UpdateEntry(ctx context.Context, e *api.BackupEntry) (*api.BackupEntry, error) {
	return updateObject(ctx, a.client.Resource(api.EntryResource), e, "BackupEntry", false)
}

func (a *apiCluster) UpdateEntryStatus(ctx context.Context, e *api.BackupEntry) (*api.BackupEntry, error) {
	return updateObject(ctx, a.client.Resource(api.EntryResource), e, "BackupEntry", true)
}

func (a *apiCluster) UpdateBucket(ctx context.Context, b *api.BackupBucket) (*api.BackupBucket, error) {
	return updateObject(ctx, a.client.Resource(api.BucketResource), b, "BackupBucket", false)
}

func (a *apiCluster) UpdateBucketStatus(ctx context.Context, b *api.BackupBucket) (*api.BackupBucket, error) {
	return updateObject(ctx, a.client.Resource(api.BucketResource), b, "BackupBucket", true)
}

func decode[T any](obj runtime.Object) (*T, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T in cache", obj)
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		return nil, fmt.Errorf("decode %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return &out, nil
}

func updateObject[T any](ctx context.Context, r dynamic.ResourceInterface, obj *T, kind string, status bool) (*T, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: api.Group, Version: api.Version, Kind: kind})
	if status {
		u, err = r.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	} else {
		u, err = r.Update(ctx, u, metav1.UpdateOptions{})
	}
	if err != nil {
		return nil, err
	}
	return decode[T](u)
}
