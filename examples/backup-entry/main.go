// Command backup-entry is Gardener's shared backup bucket as a thin
// operator: a cluster-scoped BackupBucket (one bucket in an object store,
// shared by many clusters) and a BackupEntry per cluster, each entry a prefix
// of the bucket (package backupstore). When an entry is deleted, its prefix
// is deleted once the deletion grace period has passed (package retention),
// or at once with the force-deletion annotation, and only then is its
// finalizer removed. A bucket stays while entries name it. An entry that
// names no bucket is placed in the pool of its provider and region
// (--quota entries a bucket), which grows by a bucket when all are full;
// an entry owned by a Shoot goes with it (the garbage collector); an entry
// with spec.migrateFrom has its legacy bucket's backups moved into its
// prefix, its writer Deployment paused meanwhile (backupstore/share).
//
//	go run ./examples/backup-entry      # a simulated timeline, no cluster needed
//	go run ./examples/backup-entry --kubeconfig=$HOME/.kube/config --deletion-grace-period=3d --quota=aws=100
//
// Without a kubeconfig (and outside a cluster) it plays a scenario on an
// in-memory bucket and API with a simulated clock, and prints what the
// controller saw and decided. With one, or in a pod, it reconciles the
// BackupBuckets and BackupEntries (backup.examples.groundskeeper.io/v1alpha1,
// deploy/) of the cluster as a controller-runtime manager: with
// --leader-elect one replica (the holder of the Lease backup-entry in
// --namespace) reconciles; metrics and the /healthz and /readyz probes come
// from the manager.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "backup-entry:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("backup-entry", flag.ContinueOnError)
	var common kubecmd.Flags
	common.Register(fs, "elect one active replica (a Lease named backup-entry in --namespace)")
	var o controllerOptions
	retention.DurationVar(fs, &o.grace, "deletion-grace-period", 3*retention.Day, `how long a deleted BackupEntry's prefix, a migrated entry's legacy objects and a pool bucket left empty are kept before they are deleted, e.g. "3d", "72h", "0s"`)
	fs.Var(&o.quota, "quota", `the most entries of a pool's BackupBucket, per provider (the seed's controller.backupInfrastructures.quota), e.g. "aws=100,azure=50"; an entry of a provider without one is not placed`)
	fs.StringVar(&o.installation, "installation", "", "this installation's identity among those whose pools share a store's account: the store names of the buckets a pool grows end in its hash, and their owner markers record it (default: the UID of the kube-system namespace)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "report (in events, conditions and logs) what the deletion of an entry's prefix would remove; delete nothing and keep the finalizer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	cfg, err := common.Cluster()
	if err != nil {
		return err
	}
	if cfg == nil {
		return runScenario(os.Stdout)
	}
	mgr, err := common.NewManager(cfg, "backup-entry", scheme)
	if err != nil {
		return err
	}
	if err := setupControllers(mgr, o); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mgr.Start(ctx)
}
