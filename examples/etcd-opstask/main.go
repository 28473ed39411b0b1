// Command etcd-opstask is etcd-druid's DEP-05 (operator out-of-band tasks)
// as a thin operator: a controller of EtcdOpsTask resources (package
// opstask; the resource in package api, its CRD in deploy/crd.yaml) whose
// five task kinds act on real etcd clusters and object stores: on-demand full
// and delta snapshots uploaded with gocloud, compaction and defragmentation
// through the etcd maintenance API, snapshot compaction in a temporary
// embedded etcd, recovery from a permanent loss of quorum, and copies
// of backups between stores (package backupstore). cmd/opstask is its CLI.
//
//	go run ./examples/etcd-opstask      # a simulated timeline, no cluster needed
//	go run ./examples/etcd-opstask --kubeconfig=$HOME/.kube/config \
//		--etcd main=http://127.0.0.1:2379 \
//		--backup-store 'main=s3://backups?region=eu-west-1&prefix=main/' --backup-secret main=backup-creds
//
// In a cluster it runs on a controller-runtime manager (metrics, health
// probes), without leader election: crt/tasks' Controller makes opstask's
// Controller from the manager alone and runs it on every replica; it hears
// of EtcdOpsTasks from the task store's list and watch and claims a task with a write
// guarded by the resourceVersion of a consistent read (the manager's API
// reader), so that one replica executes it; another resumes (or fails, for
// a kind that cannot resume) an execution whose replica stopped.
//
// Without a kubeconfig (and outside a cluster) it plays a scenario on an
// in-memory task store, simulated etcd clusters, in-memory buckets and a
// simulated clock, and prints what happened to each task.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	// The stores a bucket URL may name: each provider links its cloud's SDK.
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore" // azblob://
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"   // gs://
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"    // s3://
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/crt/tasks"
	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/opstask"
)

func main() {
	if err := run(ctrl.SetupSignalHandler(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "etcd-opstask:", err)
		os.Exit(1)
	}
}

// options are the flags of the real controller.
type options struct {
	namespace     string
	etcds         map[string]string // name → comma-separated client URLs
	backupStores  map[string]string // name → bucket URL
	backupSecrets map[string]string // name → Secret with the bucket's credentials
	defaultTTL    time.Duration
	maxConcurrent int
	dryRun        bool
}

// run runs the controller until ctx ends, or the scenario when there is no
// cluster.
func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("etcd-opstask", flag.ContinueOnError)
	var common kubecmd.Flags
	// No --leader-elect: every replica runs tasks, and opstask's claims
	// keep two replicas from running one task.
	common.Register(fs, "")
	o := options{
		etcds:         namedFlag(fs, "etcd", "NAME=URL[,URL...]: the client URLs of the etcd that tasks name in spec.etcdName (repeatable)"),
		backupStores:  namedFlag(fs, "backup-store", "NAME=BUCKET-URL: the backup bucket of etcd NAME, a gocloud URL (s3://, gs://, azblob://, file://); prefix=P puts its backups under P (repeatable)"),
		backupSecrets: namedFlag(fs, "backup-secret", "NAME=SECRET: the Secret, in --namespace, with the credentials of NAME's backup bucket (keys as in package backupstore); without it, the provider's ambient credentials (repeatable)"),
	}
	fs.DurationVar(&o.defaultTTL, "default-ttl", opstask.DefaultTTL, "how long a finished task is kept when its spec has no ttlSecondsAfterFinished")
	fs.IntVar(&o.maxConcurrent, "max-concurrent", opstask.DefaultMaxConcurrent, "executions at once on this replica, across etcd clusters (one at a time per cluster)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "do not compact or defragment: onDemandMaintenance tasks fail with code DryRun, saying what they would have done")
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
	o.namespace = common.Namespace
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	mgr, err := common.NewManager(cfg, "etcd-opstask", scheme)
	if err != nil {
		return err
	}
	closeOperator, err := addTaskController(mgr, o, nil)
	if err != nil {
		return err
	}
	defer closeOperator()
	mgr.GetLogger().Info("etcd-opstask controller starting", "namespace", o.namespace, "etcds", slices.Sorted(maps.Keys(o.etcds)), "dryRun", o.dryRun)
	return mgr.Start(ctx)
}

// newScheme returns the scheme of the manager: core types and EtcdOpsTask.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	return scheme, errors.Join(corev1.AddToScheme(scheme), api.AddToScheme(scheme))
}

// addTaskController adds opstask's controller of the EtcdOpsTasks in
// o.namespace to mgr, on every replica, with its metrics on the manager's
// registry, and returns the function that closes the etcd clients once mgr
// stopped. adjust, when set, may change the controller's Config before it
// is built: the chaos tests wrap its handlers and store with recorders.
func addTaskController(mgr manager.Manager, o options, adjust func(*opstask.Config)) (closeFn func(), err error) {
	// Credentials are read from the API server when a bucket is opened, so
	// a rotated Secret is used by the next task, and no Secret is cached.
	op, err := newOperator(o, crt.Secrets(mgr.GetAPIReader()))
	if err != nil {
		return nil, err
	}
	cfg := opstask.Config{Handlers: op.kinds(), DefaultTTL: o.defaultTTL, MaxConcurrent: o.maxConcurrent}
	if adjust != nil {
		adjust(&cfg)
	}
	c := &tasks.Controller{Object: &api.EtcdOpsTask{}, Config: cfg, Options: &tasks.Options{
		TargetField: api.TargetField,
		Namespace:   o.namespace,
		Metrics:     &opstask.MetricsConfig{Prefix: "etcdopstask_", TargetLabel: "etcd", NamespaceLabel: "etcd_namespace"},
	}}
	err = c.SetupWithManager(mgr)
	if err != nil {
		op.close()
		return nil, err
	}
	return op.close, nil
}

// newOperator returns the operator of the flags' etcd clusters and backup
// stores, reading bucket credentials from secrets. It refuses inconsistent
// flags, naming the flag and the value, before it connects anywhere.
func newOperator(o options, secrets backupstore.SecretGetter) (*operator, error) {
	op := &operator{targets: map[string]*Target{}, openStore: storeOpener(secrets), clock: clock.RealClock{}, dryRun: o.dryRun}
	for _, name := range slices.Sorted(maps.Keys(o.backupStores)) {
		if _, ok := o.etcds[name]; !ok {
			return nil, fmt.Errorf("--backup-store %s=%s: there is no --etcd %s to back up", name, o.backupStores[name], name)
		}
		if _, err := backupstore.Scheme(o.backupStores[name]); err != nil {
			return nil, fmt.Errorf("--backup-store %s=%s: %w", name, o.backupStores[name], err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.backupSecrets)) {
		if _, ok := o.backupStores[name]; !ok {
			return nil, fmt.Errorf("--backup-secret %s=%s: there is no --backup-store for %s", name, o.backupSecrets[name], name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.etcds)) {
		e, err := newEtcdCluster(strings.Split(o.etcds[name], ","))
		if err != nil {
			op.close()
			return nil, fmt.Errorf("--etcd %s=%s: %w", name, o.etcds[name], err)
		}
		t := &Target{Etcd: e}
		if rawURL, ok := o.backupStores[name]; ok {
			t.Backups = func(ctx context.Context) (*blob.Bucket, error) {
				return openBucket(ctx, secrets, rawURL, o.namespace, o.backupSecrets[name])
			}
		}
		op.targets[name] = t
	}
	return op, nil
}

// namedFlag defines a repeatable NAME=VALUE flag and returns its values by
// name.
func namedFlag(fs *flag.FlagSet, name, usage string) map[string]string {
	values := map[string]string{}
	fs.Func(name, usage, func(s string) error {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" || v == "" {
			return fmt.Errorf("%q: want NAME=VALUE", s)
		}
		if _, dup := values[k]; dup {
			return fmt.Errorf("%q: %s given twice", s, k)
		}
		values[k] = v
		return nil
	})
	return values
}
