// Command aerospike-gc is aerospike-operator's garbage collector as a thin
// operator: expired AerospikeNamespaceBackups (spec.ttl, counted from the
// creation timestamp) have their data deleted from the object store with
// the credentials of spec.storage.secret, then the resource is deleted; and
// persistent volume claims unmounted for longer than their pvc-ttl are
// deleted.
//
//	go run ./examples/aerospike-gc      # a simulated timeline, no cluster needed
//	go run ./examples/aerospike-gc --kubeconfig=$HOME/.kube/config --namespace=aerospike --dry-run
//
// Without a kubeconfig (and outside a cluster) it plays a scenario over
// twelve simulated days on in-memory buckets and prints what the collector
// saw and decided. With one, or in a pod, it collects the backups
// (aerospike.examples.groundskeeper.io/v1alpha1, deploy/) and claims of one
// namespace, as a controller-runtime manager: its cache watches the
// namespace's backups, claims and pods, and with --leader-elect one replica
// (the holder of the Lease aerospike-gc) collects; metrics and the /healthz
// and /readyz probes come from the manager.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "aerospike-gc:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("aerospike-gc", flag.ContinueOnError)
	var common kubecmd.Flags
	common.Register(fs, "elect one active replica (a Lease named aerospike-gc)")
	var o controllerOptions
	fs.BoolVar(&o.dryRun, "dry-run", false, "log what would be deleted (backup data, backups, claims) and write nothing")
	fs.DurationVar(&o.retryAfter, "retry-interval", 5*time.Minute, "how long a backup whose data could not be deleted waits before the next attempt")
	fs.StringVar(&o.claimSelector, "claim-selector", "", "label selector of the claims to track and collect (default: every claim in the namespace that carries the pod-name annotation)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.retryAfter <= 0 {
		return fmt.Errorf("--retry-interval %s: must be positive", o.retryAfter)
	}

	cfg, err := common.Cluster()
	if err != nil {
		return err
	}
	if cfg == nil {
		return runScenario(os.Stdout)
	}
	o.namespace = common.Namespace
	mgr, err := common.NewManager(cfg, "aerospike-gc", scheme)
	if err != nil {
		return err
	}
	if err := setupCollector(mgr, o, clock.RealClock{}, nil); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mgr.Start(ctx)
}
