package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/etcdlock"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// controllerOptions are the flags of the real controller.
type controllerOptions struct {
	namespace      string
	lockID         string
	lockBackend    string
	lockConfigMap  string
	etcdEndpoints  string
	etcdPrefix     string
	fdbClusterFile string
	lockDuration   time.Duration
	actionDuration time.Duration
	deniedRetry    time.Duration
}

// backends open a lock backend by the --lock-backend name; backend_fdb.go
// adds "fdb" when built along (it is not, by default: see that file).
var backends = map[string]func(ctx context.Context, o controllerOptions, cfg *rest.Config) (locking.Backend, io.Closer, error){
	"memory": func(context.Context, controllerOptions, *rest.Config) (locking.Backend, io.Closer, error) {
		return memlock.New(), io.NopCloser(nil), nil
	},
	"kubernetes": func(_ context.Context, o controllerOptions, cfg *rest.Config) (locking.Backend, io.Closer, error) {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, nil, err
		}
		b, err := kubelock.New(kubelock.Config{Client: kubelock.ClientGo(cs.CoreV1()), Namespace: o.namespace, Name: o.lockConfigMap})
		return b, io.NopCloser(nil), err
	},
	"etcd": func(_ context.Context, o controllerOptions, _ *rest.Config) (locking.Backend, io.Closer, error) {
		if o.etcdEndpoints == "" {
			return nil, nil, errors.New("--lock-backend=etcd needs --etcd-endpoints")
		}
		c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(o.etcdEndpoints, ","), DialTimeout: 5 * time.Second})
		if err != nil {
			return nil, nil, fmt.Errorf("etcd client: %w", err)
		}
		b, err := etcdlock.New(etcdlock.Config{KV: c, Prefix: o.etcdPrefix})
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return b, c, nil
	},
}

// runController reconciles the Databases of one namespace until ctx ends.
// act carries out the global operations (logAndWait outside tests).
func runController(ctx context.Context, cfg *rest.Config, o controllerOptions, act actor) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("lockID", o.lockID)
	if o.lockID == "" {
		return errors.New("--lock-id is required: it names this instance in the lock (the FoundationDB operator uses the processGroupIDPrefix)")
	}
	open, ok := backends[o.lockBackend]
	if !ok {
		return fmt.Errorf("--lock-backend %q: want one of memory, kubernetes, etcd (fdb needs backend_fdb.go)", o.lockBackend)
	}
	backend, closer, err := open(ctx, o, cfg)
	if err != nil {
		return fmt.Errorf("lock backend %s: %w", o.lockBackend, err)
	}
	defer closer.Close()
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	op := &operator{
		id:          o.lockID,
		backend:     backend,
		lockConfig:  locking.Config{Duration: o.lockDuration},
		dbs:         dynamicDatabases{client},
		actor:       act,
		deniedRetry: o.deniedRetry,
	}
	runner, err := op.newRunner(subreconcile.Config[*Database, *loopState]{})
	if err != nil {
		return err
	}

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "databases"})
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 10*time.Minute, o.namespace, nil)
	informer := factory.ForResource(databaseGVR)
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			queue.Add(key)
		}
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return fmt.Errorf("waiting for the %s informer: %w", databaseGVR.Resource, ctx.Err())
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	log.Info("controller started", "namespace", o.namespace, "lockBackend", o.lockBackend)
	for {
		key, quit := queue.Get()
		if quit {
			return nil
		}
		reconcile(ctx, log, informer.Lister(), runner, queue, key)
	}
}

func reconcile(ctx context.Context, log logr.Logger, lister cache.GenericLister, runner *subreconcile.Runner[*Database, *loopState], queue workqueue.TypedRateLimitingInterface[string], key string) {
	defer queue.Done(key)
	log = log.WithValues("database", key)
	obj, err := lister.Get(key)
	if err != nil { // deleted: nothing to reconcile
		queue.Forget(key)
		return
	}
	db, err := fromUnstructured(obj.(*unstructured.Unstructured))
	if err != nil {
		log.Error(err, "cannot decode")
		queue.Forget(key)
		return
	}
	out := runner.Run(logr.NewContext(ctx, log), db)
	if out.Err != nil && ctx.Err() == nil {
		log.Error(out.Err, "reconcile failed")
	}
	subreconcile.Enqueue(queue, key, out)
}

type dynamicDatabases struct{ client dynamic.Interface }

func (d dynamicDatabases) Get(ctx context.Context, namespace, name string) (*Database, error) {
	u, err := d.client.Resource(databaseGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(u)
}

func (d dynamicDatabases) UpdateStatus(ctx context.Context, db *Database) (*Database, error) {
	u, err := toUnstructured(db)
	if err != nil {
		return nil, err
	}
	u, err = d.client.Resource(databaseGVR).Namespace(db.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(u)
}

// logAndWait stands in for the database commands of the global operations:
// it logs the operation and takes as long as one would.
type logAndWait struct{ duration time.Duration }

func (a logAndWait) Act(ctx context.Context, instance, operation string) error {
	logr.FromContextOrDiscard(ctx).Info("global operation", "operation", operation)
	t := time.NewTimer(a.duration)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
