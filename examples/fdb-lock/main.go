// Command fdb-lock is the FoundationDB operator's locking pattern as a thin
// operator: a subreconciler chain (package subreconcile) whose global steps
// take the global operator lock (package locking), with the deny list and
// the disable switch driven from the resource's spec.
//
//	go run ./examples/fdb-lock      # a simulated timeline, no cluster needed
//	go run ./examples/fdb-lock --kubeconfig=$HOME/.kube/config --lock-id=dc1
//
// Without a kubeconfig (and outside a cluster) it plays a scenario on an
// in-memory lock with a simulated clock and prints what each instance saw
// and decided. With one, or in a pod, it is a controller of the Database
// resources (examples.groundskeeper.io/v1alpha1, api and deploy/crd.yaml) of one
// namespace, on a controller-runtime manager (leader election among the
// replicas of one instance on the Lease fdb-lock-<lock-id> with
// --leader-elect, metrics, health probes); run one instance per data
// centre, each with its own --lock-id, on a lock backend they share
// (kubernetes: a ConfigMap; etcd). A global step acts only while the
// global lock is valid: leader election keeps one replica of an instance
// active, the lock keeps the instances apart.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
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

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fdb-lock:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("fdb-lock", flag.ContinueOnError)
	var common kubecmd.Flags
	common.Register(fs, "elect one active replica among those with the same --lock-id (a Lease named fdb-lock-<lock-id>)")
	var o controllerOptions
	fs.StringVar(&o.lockID, "lock-id", "", "this instance's lock ID, unique per data centre (required)")
	fs.StringVar(&o.lockURL, "lock-url", "", "where the lock lives: configmap://NAMESPACE/NAME, etcd://HOST:PORT[,HOST:PORT]/PREFIX, mem:// (one process only); default configmap://<--namespace>/fdb-lock-global")
	fs.DurationVar(&o.lockDuration, "lock-duration", locking.DefaultDuration, "how long a taken or extended lock lasts")
	fs.DurationVar(&o.actionDuration, "action-duration", 2*time.Second, "how long a simulated global operation takes")
	fs.DurationVar(&o.deniedRetry, "denied-retry", time.Minute, "how often a denied instance looks again")
	if err := fs.Parse(args); err != nil {
		return err
	}

	cfg, err := common.Cluster()
	if err != nil {
		return err
	}
	if cfg == nil {
		return runScenario(os.Stdout)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.lockURL == "" {
		o.lockURL = "configmap://" + common.Namespace + "/fdb-lock-global"
	}
	backend, closer, err := openBackend(ctx, o, cfg)
	if err != nil {
		return err
	}
	defer closer.Close()
	mgr, err := newManager(cfg, &common, o, backend, logAndWait{o.actionDuration})
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// controllerOptions are the flags of the real controller.
type controllerOptions struct {
	lockID         string
	lockURL        string
	lockDuration   time.Duration
	actionDuration time.Duration
	deniedRetry    time.Duration
	// clock is the lock's clock, on which Lock.Do also ends a global step
	// at its lease's end: the real clock if nil. Not a flag: tests inject
	// one (the chaos workload records the readings, and plants a skewed
	// one).
	clock clock.Clock
}

// openers are the lock backends --lock-url may name, besides configmap://
// (openBackend adds it); backend_fdb.go adds fdb:// when built along (it is
// not, by default: see that file). Each reads and writes the lock on its
// store directly, never through a cache.
var openers = map[string]locking.Opener{"mem": memlock.Open, "etcd": etcdlock.Open}

// openBackend opens the lock backend of --lock-url.
func openBackend(ctx context.Context, o controllerOptions, cfg *rest.Config) (locking.Backend, io.Closer, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	all := maps.Clone(openers)
	all["configmap"] = kubelock.Opener(kubelock.ClientGo(cs.CoreV1()))
	return locking.Open(ctx, o.lockURL, all)
}

// scheme holds the types the controller reads: Databases and client-go's.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(api.AddToScheme(scheme))
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
	mgr, err := common.NewManager(cfg, "fdb-lock-"+o.lockID, scheme, opts...)
	if err != nil {
		return nil, err
	}
	// The global steps read the Database again once they hold the lock
	// (the previous holder may have done the work): from the API server,
	// not the cache.
	op := &operator{controllerOptions: o, backend: backend, live: mgr.GetAPIReader(), c: mgr.GetClient(), actor: act}
	runner, err := op.newRunner(subreconcile.Config[*Database, *loopState]{})
	if err != nil {
		return nil, err
	}
	// The chain writes the status itself, each global step while it holds
	// the lock, so that the next holder sees what was done; the status
	// write crt.Reconciler makes after the chain then changes nothing.
	// Its controller is named after the kind: "database".
	err = crt.Reconciler[*Database, *loopState]{Client: mgr.GetClient(), Runner: runner,
		New: func() *Database { return new(Database) }}.SetupWithManager(mgr)
	return mgr, err
}

// logAndWait stands in for the database commands of the global operations:
// it logs the operation and takes as long as one would.
type logAndWait struct{ duration time.Duration }

func (a logAndWait) Act(ctx context.Context, instance, operation string) error {
	logr.FromContextOrDiscard(ctx).Info("global operation", "operation", operation)
	select {
	case <-time.After(a.duration):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
