// Command fdb-lock is the FoundationDB operator's locking pattern as a thin
// operator: a subreconciler chain (package subreconcile) whose global steps
// take the global operator lock (package locking), with the deny list and
// the disable switch driven from the resource's spec.
//
//	go run ./examples/fdb-lock      # a simulated timeline, no cluster needed
//	go run ./examples/fdb-lock --kubeconfig=$HOME/.kube/config --lock-id=dc1 --lock-backend=kubernetes
//
// Without a kubeconfig (and outside a cluster) it plays a scenario on an
// in-memory lock with a simulated clock and prints what each instance saw
// and decided. With one, or in a pod, it is a controller of the Database
// resources (examples.groundskeeper.io/v1alpha1, deploy/crd.yaml) of one
// namespace; run one instance per data centre, each with its own --lock-id,
// on a lock backend they share (kubernetes: a ConfigMap; etcd).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fdb-lock:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("fdb-lock", flag.ContinueOnError)
	var o controllerOptions
	kubeconfig := fs.String("kubeconfig", "", "path to a kubeconfig; without it, and outside a cluster, the simulated scenario runs")
	fs.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace whose Databases to reconcile, and of the lock ConfigMap (default: $POD_NAMESPACE, else the kubeconfig's)")
	fs.StringVar(&o.lockID, "lock-id", "", "this instance's lock ID, unique per data centre (required)")
	fs.StringVar(&o.lockBackend, "lock-backend", "kubernetes", "where the lock lives: memory (one process only), kubernetes, etcd")
	fs.StringVar(&o.lockConfigMap, "lock-configmap", "fdb-lock-global", "ConfigMap holding the lock, with --lock-backend=kubernetes")
	fs.StringVar(&o.etcdEndpoints, "etcd-endpoints", "", "comma-separated etcd client URLs, with --lock-backend=etcd")
	fs.StringVar(&o.etcdPrefix, "etcd-prefix", "/fdb-lock/", "etcd key prefix of the lock, with --lock-backend=etcd")
	fs.StringVar(&o.fdbClusterFile, "fdb-cluster-file", "", "FoundationDB cluster file, with --lock-backend=fdb (built with -tags fdb)")
	fs.DurationVar(&o.lockDuration, "lock-duration", locking.DefaultDuration, "how long a taken or extended lock lasts")
	fs.DurationVar(&o.actionDuration, "action-duration", 2*time.Second, "how long a simulated global operation takes")
	fs.DurationVar(&o.deniedRetry, "denied-retry", time.Minute, "how often a denied instance looks again")
	level := fs.String("zap-log-level", "info", "log verbosity: debug, info, error, or an integer N > 0 for logr V(N)")
	devel := fs.Bool("zap-devel", false, "human-readable console logs instead of JSON")
	leaderElect := fs.Bool("leader-elect", false, "elect one active replica among those with the same --lock-id (a Lease named fdb-lock-<lock-id>)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	cfg, err := restConfig(*kubeconfig, &o.namespace)
	if err != nil {
		return err
	}
	if cfg == nil {
		return runScenario(os.Stdout)
	}
	log, err := newLogger(*level, *devel)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logr.NewContext(ctx, log)
	if !*leaderElect {
		return runController(ctx, cfg, o, logAndWait{o.actionDuration})
	}
	return leading(ctx, cfg, o.namespace, "fdb-lock-"+o.lockID, func(ctx context.Context) error {
		return runController(ctx, cfg, o, logAndWait{o.actionDuration})
	})
}

// leading runs fn while this replica leads, through client-go's leader
// election on a Lease. Replicas of one instance share a lock ID, so the
// global lock cannot tell them apart: only the leader may run.
func leading(ctx context.Context, cfg *rest.Config, namespace, name string, fn func(context.Context) error) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	var runErr error
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: fmt.Sprintf("%s_%d", host, os.Getpid())},
		},
		LeaseDuration:   15 * time.Second,
		RenewDeadline:   10 * time.Second,
		RetryPeriod:     2 * time.Second,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { runErr = fn(ctx) },
			OnStoppedLeading: func() {},
		},
	})
	if runErr == nil && ctx.Err() == nil {
		runErr = errors.New("leader election lost")
	}
	return runErr
}

// restConfig returns nil, nil when there is neither a kubeconfig nor an
// in-cluster configuration: the scenario runs then.
func restConfig(kubeconfig string, namespace *string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, nil
		}
		if *namespace == "" {
			*namespace = "default"
		}
		return cfg, err
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{})
	if *namespace == "" {
		ns, _, err := loader.Namespace()
		if err != nil {
			return nil, err
		}
		*namespace = ns
	}
	return loader.ClientConfig()
}

// newLogger builds the logr.Logger the packages log through, from zap, with
// controller-runtime's --zap-log-level convention.
func newLogger(level string, devel bool) (logr.Logger, error) {
	var l zapcore.Level
	if n, err := strconv.Atoi(level); err == nil && n > 0 {
		l = zapcore.Level(-n)
	} else if err := l.UnmarshalText([]byte(level)); err != nil {
		return logr.Logger{}, fmt.Errorf("--zap-log-level %q: %w", level, err)
	}
	cfg := zap.NewProductionConfig()
	if devel {
		cfg = zap.NewDevelopmentConfig()
	}
	cfg.Level = zap.NewAtomicLevelAt(l)
	z, err := cfg.Build()
	if err != nil {
		return logr.Logger{}, err
	}
	return zapr.NewLogger(z), nil
}
