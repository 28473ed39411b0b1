package backups

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/crt"
)

// Object is a pointer to a typed backup resource registered in the
// manager's scheme, with its list type named <Kind>List, as generated API
// types are: *v1.Backup for B = v1.Backup.
type Object[B any] interface {
	*B
	client.Object
}

// Objects returns the collect.Objects of the manager's client c (cached
// List, writes) and its API reader live (Get, the fresh read every deletion
// is decided on): Objects[*v1.Backup](mgr.GetClient(), mgr.GetAPIReader()).
// Delete sends UID and resourceVersion preconditions.
func Objects[P Object[B], B any](c client.Client, live client.Reader) collect.Objects[P] {
	return objects[P, B]{c: c, live: live}
}

type objects[P Object[B], B any] struct {
	c    client.Client
	live client.Reader
}

func (o objects[P, B]) List(ctx context.Context, namespace string) ([]P, error) {
	return listWith[P](ctx, o.c.Scheme(), o.c, namespace)
}

// LiveList returns a function that lists the objects of type P in
// namespace ("" for all) with the API reader live, never from a cache:
// pool.Config.LiveEntries is
// backups.LiveList[*v1.Entry](mgr.GetScheme(), mgr.GetAPIReader(), "").
func LiveList[P Object[B], B any](scheme *runtime.Scheme, live client.Reader, namespace string) func(context.Context) ([]P, error) {
	return func(ctx context.Context) ([]P, error) { return listWith[P](ctx, scheme, live, namespace) }
}

func listWith[P Object[B], B any](ctx context.Context, scheme *runtime.Scheme, r client.Reader, namespace string) ([]P, error) {
	gvk, err := apiutil.GVKForObject(P(new(B)), scheme)
	if err != nil {
		return nil, err
	}
	obj, err := scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
	}
	list, ok := obj.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("list %s: %T is not a client.ObjectList", gvk.Kind, obj)
	}
	if err := r.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]P, 0, len(items))
	for _, it := range items {
		p, ok := it.(P)
		if !ok {
			return nil, fmt.Errorf("list %s: item of type %T", gvk.Kind, it)
		}
		out = append(out, p)
	}
	return out, nil
}

func (o objects[P, B]) Get(ctx context.Context, namespace, name string) (P, error) {
	p := P(new(B))
	if err := o.live.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, p); err != nil {
		return nil, err
	}
	return p, nil
}

func (o objects[P, B]) UpdateStatus(ctx context.Context, obj P) error {
	return o.c.Status().Update(ctx, obj)
}

func (o objects[P, B]) Update(ctx context.Context, obj P) error { return o.c.Update(ctx, obj) }

func (o objects[P, B]) Delete(ctx context.Context, namespace, name string, uid types.UID, resourceVersion string) error {
	p := P(new(B))
	p.SetNamespace(namespace)
	p.SetName(name)
	return o.c.Delete(ctx, p, client.Preconditions{UID: &uid, ResourceVersion: &resourceVersion})
}

// Collection runs a collect.Collector on a manager, as a controller:
// every change to a backup runs the collector's pass over its namespace
// (one request per namespace, so passes of a namespace never overlap and a
// burst of events costs one pass), requeued when the pass says the next
// decision is due. With a collect.Finalizer in the collector's Config, it
// also adds the finalizer to each backup (Collector.Prepare) and finalizes
// each deleted one (Collector.Finalize).
//
//	err := backups.Collection[*v1.Backup]{Name: "backup-gc", Collector: c}.SetupWithManager(mgr)
type Collection[P client.Object] struct {
	// Name is the controller's name. Required.
	Name string
	// Collector is the collector it runs. Required.
	Collector *collect.Collector[P]
	// Clock is the clock of the controller's queue, whose delayed requeues
	// then follow the collector's clock (a fake one in tests); default the
	// real clock.
	Clock clock.WithTicker
	// OnPass, if set, is called with the report of every pass.
	OnPass func(collect.Report)
}

// SetupWithManager adds the controller to mgr. P must be a pointer to a
// struct type registered in mgr's scheme (*v1.Backup).
func (c Collection[P]) SetupWithManager(mgr manager.Manager) error {
	switch {
	case c.Name == "":
		return fmt.Errorf("backups: Collection.Name is empty")
	case c.Collector == nil:
		return fmt.Errorf("backups: Collection %q: Collector is nil", c.Name)
	case reflect.TypeFor[P]().Kind() != reflect.Pointer:
		return fmt.Errorf("backups: Collection %q: %s is not a pointer type", c.Name, reflect.TypeFor[P]())
	}
	clk := c.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	col := c.Collector
	r := &reconciler[P]{c: col, client: mgr.GetClient(), onPass: c.OnPass}
	// A pass request has no name; a backup's own request (Prepare,
	// Finalize) has its name.
	toRequests := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace()}}}
		if col.Finalizer() != "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
		return reqs
	})
	return builder.ControllerManagedBy(mgr).Named(c.Name).
		Watches(newObject[P](), toRequests).
		WithOptions(controller.Options{NewQueue: crt.QueueOn(clk)}).
		Complete(r)
}

// newObject returns a new *B for P = *B.
func newObject[P client.Object]() P {
	return reflect.New(reflect.TypeFor[P]().Elem()).Interface().(P)
}

type reconciler[P client.Object] struct {
	c      *collect.Collector[P]
	client client.Client
	onPass func(collect.Report)
}

func (r *reconciler[P]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx).WithValues("dryRun", r.c.DryRun())
	if req.Name == "" {
		rep, err := r.c.Pass(ctx, req.Namespace)
		for _, o := range rep.Backups {
			log.V(1).Info("backup", "name", o.Name, "deleted", o.Deleted, "reason", o.Reason, "message", o.Message)
		}
		if r.onPass != nil {
			r.onPass(rep)
		}
		return crt.Result(ctx, rep.RequeueAfter, err)
	}
	p := newObject[P]()
	if err := r.client.Get(ctx, req.NamespacedName, p); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if p.GetDeletionTimestamp() == nil {
		return crt.Result(ctx, 0, r.c.Prepare(ctx, p))
	}
	out, after, err := r.c.Finalize(ctx, p)
	if out.Name != "" {
		log.V(1).Info("finalize", "name", out.Name, "deleted", out.Deleted, "reason", out.Reason, "message", out.Message)
	}
	return crt.Result(ctx, after, err)
}
