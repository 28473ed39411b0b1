package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/manager/signals"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	if err := run(signals.SetupSignalHandler(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "minidb:", err)
		os.Exit(1)
	}
}

// run parses the flags, builds the manager and runs it until ctx ends.
func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("minidb", flag.ContinueOnError)
	var (
		namespace   = fs.String("namespace", "", "watch MiniDBs, their backups, tasks, pods and claims in this namespace only (default: every namespace)")
		leaderElect = fs.Bool("leader-elect", false, "elect one active replica (a Lease named minidb in --lock-namespace)")
		metricsAddr = fs.String("metrics-bind-address", "0", `address of the metrics endpoint ("0": none)`)
		probeAddr   = fs.String("health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
		o           Options
	)
	fs.StringVar(&o.LockID, "lock-id", os.Getenv("HOSTNAME"), "this replica's name in the global lock (default: $HOSTNAME, the pod's name)")
	fs.StringVar(&o.LockNamespace, "lock-namespace", "default", "namespace of the global lock's ConfigMap (minidb-lock) and of the leader election's Lease")
	// --kubeconfig, as controller-runtime's config.GetConfig reads it.
	config.RegisterFlags(fs)
	zo := zap.Options{}
	zo.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.LockID == "" {
		return fmt.Errorf("--lock-id is empty and so is $HOSTNAME: name this replica")
	}
	log.SetLogger(zap.New(zap.UseFlagOptions(&zo)))

	cfg, err := config.GetConfig()
	if err != nil {
		return err
	}
	mo := manager.Options{
		Scheme:                        Scheme,
		LeaderElection:                *leaderElect,
		LeaderElectionID:              "minidb",
		LeaderElectionNamespace:       o.LockNamespace,
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:        *probeAddr,
	}
	if *namespace != "" {
		// The lock's ConfigMap is read in its own namespace.
		mo.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}, o.LockNamespace: {}}}
	}
	mgr, err := manager.New(cfg, mo)
	if err != nil {
		return fmt.Errorf("new manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := Setup(ctx, mgr, o); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
