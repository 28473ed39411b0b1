package backups

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/crt"
)

// Sharing runs a *share.Share, a *pool.Pool over one, or a
// migrate.Controller on a manager: SetupWithManager adds two controllers,
// Name+"-entries" and Name+"-buckets", each with one worker (admissions
// must not race):
//
//   - the entry controller runs ReconcileEntry when an entry appears or
//     its spec or metadata change, not when only its status does (the
//     controller writes the status, and a failing deletion would retry at
//     once instead of with backoff), and for the entries that wait for a
//     place in a bucket (share.Share.Waiting) when the bucket changes or
//     an entry of it is gone;
//   - the bucket controller runs ReconcileBucket when a bucket changes
//     and when an entry that names it changes.
//
// E and B are pointers to the entry's and the bucket's struct types,
// registered in the manager's scheme.
type Sharing[E, B client.Object] struct {
	// Name prefixes the controllers' names. Required.
	Name string
	// Reconciler is what the controllers run. Required.
	Reconciler share.Reconciler[E, B]
	// Reader reads the entry or bucket of a request; default the
	// manager's client (its cache). A wrapper may scope the controllers
	// to some objects or inject faults in tests.
	Reader client.Reader
}

// SetupWithManager adds the two controllers to mgr.
func (sh Sharing[E, B]) SetupWithManager(mgr manager.Manager) error {
	switch {
	case sh.Name == "":
		return fmt.Errorf("backups: Sharing.Name is empty")
	case sh.Reconciler == nil:
		return fmt.Errorf("backups: Sharing %q: Reconciler is nil", sh.Name)
	case reflect.TypeFor[E]().Kind() != reflect.Pointer:
		return fmt.Errorf("backups: Sharing %q: %s is not a pointer type", sh.Name, reflect.TypeFor[E]())
	case reflect.TypeFor[B]().Kind() != reflect.Pointer:
		return fmt.Errorf("backups: Sharing %q: %s is not a pointer type", sh.Name, reflect.TypeFor[B]())
	}
	s, name := sh.Reconciler, sh.Name
	r := sh.Reader
	if r == nil {
		r = mgr.GetClient()
	}
	notStatusOnly := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !statusOnlyChange(e.ObjectOld, e.ObjectNew) }}
	waitingFor := func(ctx context.Context, b B) []reconcile.Request {
		waiting, err := s.Waiting(ctx, b)
		if err != nil {
			logf.FromContext(ctx).Error(err, "list entries", "bucket", b.GetName())
			return nil
		}
		var reqs []reconcile.Request
		for _, e := range waiting {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e)})
		}
		return reqs
	}
	waiting := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		return waitingFor(ctx, obj.(B))
	})
	// A deleted entry frees its place once it is gone: the entries waiting
	// for a place in its bucket are reconciled then, whether or not the
	// bucket's status changes.
	freed := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		ns, n := s.BucketOf(obj.(E))
		b := newObject[B]()
		if n == "" || r.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, b) != nil {
			return nil
		}
		return waitingFor(ctx, b)
	})
	onlyDeletes := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	err := builder.ControllerManagedBy(mgr).Named(name+"-entries").
		For(newObject[E](), builder.WithPredicates(notStatusOnly)).
		Watches(newObject[B](), waiting).
		Watches(newObject[E](), freed, builder.WithPredicates(onlyDeletes)).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			e := newObject[E]()
			if err := r.Get(ctx, req.NamespacedName, e); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			after, err := s.ReconcileEntry(ctx, e)
			return crt.Result(ctx, after, err)
		}))
	if err != nil {
		return err
	}
	return setupBuckets(mgr, name, s, r)
}

// setupBuckets adds the bucket controller: ReconcileBucket when a bucket
// changes and when an entry that names it changes.
func setupBuckets[E, B client.Object](mgr manager.Manager, name string, s share.Reconciler[E, B], r client.Reader) error {
	bucketOf := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		ns, n := s.BucketOf(obj.(E))
		if n == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: n}}}
	})
	return builder.ControllerManagedBy(mgr).Named(name+"-buckets").
		For(newObject[B]()).
		Watches(newObject[E](), bucketOf).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			b := newObject[B]()
			if err := r.Get(ctx, req.NamespacedName, b); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			after, err := s.ReconcileBucket(ctx, b)
			return crt.Result(ctx, after, err)
		}))
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
