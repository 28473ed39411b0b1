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
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
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
	var common kubecmd.Flags
	common.Register(fs, "elect one active replica among those with the same --lock-id (a Lease named fdb-lock-<lock-id>)")
	var o controllerOptions
	fs.StringVar(&o.lockID, "lock-id", "", "this instance's lock ID, unique per data centre (required)")
	fs.StringVar(&o.lockBackend, "lock-backend", "kubernetes", "where the lock lives: memory (one process only), kubernetes, etcd")
	fs.StringVar(&o.lockConfigMap, "lock-configmap", "fdb-lock-global", "ConfigMap holding the lock, with --lock-backend=kubernetes")
	fs.StringVar(&o.etcdEndpoints, "etcd-endpoints", "", "comma-separated etcd client URLs, with --lock-backend=etcd")
	fs.StringVar(&o.etcdPrefix, "etcd-prefix", "/fdb-lock/", "etcd key prefix of the lock, with --lock-backend=etcd")
	fs.StringVar(&o.fdbClusterFile, "fdb-cluster-file", "", "FoundationDB cluster file, with --lock-backend=fdb (with backend_fdb.go built in)")
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
	backend, closer, err := openBackend(ctx, o, cfg, common.Namespace)
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
