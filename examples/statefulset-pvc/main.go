// Command statefulset-pvc is KEP-1847 (auto-deletion of the claims a
// StatefulSet creates) for a custom workload: a controller of ReplicatedSets
// (apps.examples.groundskeeper.io/v1alpha1, deploy/), which create pods
// <set>-<ordinal> and claims <template>-<set>-<ordinal> as a StatefulSet
// does, with the claims' owner references set by package lifecycle so that
// the cluster's garbage collector deletes them as the set's retention policy
// says.
//
//	go run ./examples/statefulset-pvc      # a simulated timeline, no cluster needed
//	go run ./examples/statefulset-pvc --kubeconfig=$HOME/.kube/config --namespace=demo
//
// In a cluster it runs on a controller-runtime manager: one reconciler of
// ReplicatedSets that owns their pods and watches claims, with leader
// election on the Lease statefulset-pvc (--leader-elect), metrics and
// health probes. Without a kubeconfig (and outside a cluster) it plays the
// four policies on a simulated API server with a small simulated garbage
// collector and prints what happened to every claim and why.
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
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "statefulset-pvc:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("statefulset-pvc", flag.ContinueOnError)
	var common kubecmd.Flags
	common.Register(fs, "elect one active replica (a Lease named statefulset-pvc)")
	var o controllerOptions
	fs.BoolVar(&o.dryRun, "dry-run", false, "create missing pods and claims, but change no claim's owner references and delete no pod: report what would be done as events")
	fs.DurationVar(&o.resync, "resync", 10*time.Minute, "how often every set is reconciled without a change")
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
	mgr, err := newManager(cfg, &common, o)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mgr.Start(ctx)
}
