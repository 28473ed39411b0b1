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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/examples/fdb-lock/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/etcdlock"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// controllerOptions are the flags of the real controller.
type controllerOptions struct {
	lockID         string
	lockBackend    string
	lockConfigMap  string
	etcdEndpoints  string
	etcdPrefix     string
	fdbClusterFile string
	lockDuration   time.Duration
	actionDuration time.Duration
	deniedRetry    time.Duration
	// clock is the lock's clock, on which Lock.Do also ends a global step
	// at its lease's end: the real clock if nil. Not a flag: tests inject
	// one (the chaos workload records the readings, and plants a skewed
	// one).
	clock clock.Clock
}

// backends open a lock backend by the --lock-backend name; backend_fdb.go
// adds "fdb" when built along (it is not, by default: see that file). The backend reads and writes the
// lock on its store directly, never through a cache.
var backends = map[string]func(ctx context.Context, o controllerOptions, cfg *rest.Config, namespace string) (locking.Backend, io.Closer, error){
	"memory": func(context.Context, controllerOptions, *rest.Config, string) (locking.Backend, io.Closer, error) {
		return memlock.New(), io.NopCloser(nil), nil
	},
	"kubernetes": func(_ context.Context, o controllerOptions, cfg *rest.Config, namespace string) (locking.Backend, io.Closer, error) {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, nil, err
		}
		b, err := kubelock.New(kubelock.Config{Client: kubelock.ClientGo(cs.CoreV1()), Namespace: namespace, Name: o.lockConfigMap})
		return b, io.NopCloser(nil), err
	},
	"etcd": func(_ context.Context, o controllerOptions, _ *rest.Config, _ string) (locking.Backend, io.Closer, error) {
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

// openBackend opens the lock backend of --lock-backend.
func openBackend(ctx context.Context, o controllerOptions, cfg *rest.Config, namespace string) (locking.Backend, io.Closer, error) {
	open, ok := backends[o.lockBackend]
	if !ok {
		return nil, nil, fmt.Errorf("--lock-backend %q: want one of memory, kubernetes, etcd (fdb needs backend_fdb.go)", o.lockBackend)
	}
	b, closer, err := open(ctx, o, cfg, namespace)
	if err != nil {
		return nil, nil, fmt.Errorf("lock backend %s: %w", o.lockBackend, err)
	}
	return b, closer, nil
}

// newManager returns the controller-runtime manager of one instance, with
// its Database controller: the chain over every Database of the namespace,
// taking the global lock on backend, and act carrying out the global
// operations (logAndWait outside tests). Replicas of one instance share its
// lock ID, so the global lock cannot tell them apart: with --leader-elect
// only the leader of the Lease fdb-lock-<lock-id> runs the controller. opts
// adjust the manager's options last (tests run several in one process).
func newManager(cfg *rest.Config, common *kubecmd.Flags, o controllerOptions, backend locking.Backend, act actor, opts ...func(*manager.Options)) (manager.Manager, error) {
	if o.lockID == "" {
		return nil, errors.New("--lock-id is required: it names this instance in the lock (the FoundationDB operator uses the processGroupIDPrefix)")
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := api.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgr, err := common.NewManager(cfg, "fdb-lock-"+o.lockID, scheme, opts...)
	if err != nil {
		return nil, err
	}
	op := &operator{
		id:         o.lockID,
		backend:    backend,
		lockConfig: locking.Config{Duration: o.lockDuration, Clock: o.clock},
		// The global steps read the Database again once they hold the lock
		// (the previous holder may have done the work): from the API
		// server, not the cache.
		dbs:         apiDatabases{live: mgr.GetAPIReader(), c: mgr.GetClient()},
		actor:       act,
		deniedRetry: o.deniedRetry,
	}
	runner, err := op.newRunner(subreconcile.Config[*Database, *loopState]{})
	if err != nil {
		return nil, err
	}
	// The chain writes the status itself, each global step while it holds
	// the lock, so that the next holder sees what was done; the status
	// write crt.Reconciler makes after the chain then changes nothing.
	err = ctrl.NewControllerManagedBy(mgr).
		For(&api.Database{}).
		Named("database").
		Complete(crt.Reconciler(mgr.GetClient(), runner, func() *Database { return new(Database) }))
	return mgr, err
}

// apiDatabases reads Databases from the API server and writes their status.
type apiDatabases struct {
	live client.Reader
	c    client.Client
}

func (d apiDatabases) Get(ctx context.Context, namespace, name string) (*Database, error) {
	var db Database
	if err := d.live.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &db); err != nil {
		return nil, err
	}
	return &db, nil
}

func (d apiDatabases) UpdateStatus(ctx context.Context, db *Database) (*Database, error) {
	next := db.DeepCopy()
	if err := d.c.Status().Update(ctx, next); err != nil {
		return nil, err
	}
	return next, nil
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
