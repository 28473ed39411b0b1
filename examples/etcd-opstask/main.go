// Command etcd-opstask is etcd-druid's DEP-05 (operator out-of-band tasks)
// as a thin operator: a controller of EtcdOpsTask resources (package
// opstask; the resource in package api, its CRD in deploy/crd.yaml) whose
// five task kinds act on real etcd clusters and object stores: on-demand full
// and delta snapshots uploaded with gocloud, compaction and defragmentation
// through the etcd maintenance API, a check of the snapshot chain, and copies
// of backups between stores (package backupstore). cmd/opstask is its CLI.
//
//	go run ./examples/etcd-opstask      # a simulated timeline, no cluster needed
//	go run ./examples/etcd-opstask --kubeconfig=$HOME/.kube/config \
//		--etcd main=http://127.0.0.1:2379 \
//		--backup-store 'main=s3://backups?region=eu-west-1&prefix=main/' --backup-secret main=backup-creds
//
// In a cluster it runs on a controller-runtime manager (metrics, health
// probes), without leader election: opstask's Controller runs on every
// replica, fed by the manager's informer on EtcdOpsTasks, and claims a task
// with a write guarded by the resourceVersion of a consistent read, so that
// one replica executes it; another resumes (or fails, for a kind that cannot
// resume) an execution whose replica stopped.
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
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	// The stores a bucket URL may name: each provider links its cloud's SDK.
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore" // azblob://
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"   // gs://
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"    // s3://
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
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
	etcds         namedFlag // name → comma-separated client URLs
	backupStores  namedFlag // name → bucket URL
	backupSecrets namedFlag // name → Secret with the bucket's credentials
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
	o := options{etcds: namedFlag{}, backupStores: namedFlag{}, backupSecrets: namedFlag{}}
	fs.Var(o.etcds, "etcd", "NAME=URL[,URL...]: the client URLs of the etcd that tasks name in spec.etcdName (repeatable)")
	fs.Var(o.backupStores, "backup-store", "NAME=BUCKET-URL: the backup bucket of etcd NAME, a gocloud URL (s3://, gs://, azblob://, file://); prefix=P puts its backups under P (repeatable)")
	fs.Var(o.backupSecrets, "backup-secret", "NAME=SECRET: the Secret, in --namespace, with the credentials of NAME's backup bucket (keys as in package backupstore); without it, the provider's ambient credentials (repeatable)")
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
	closeOperator, err := addTaskController(mgr, cfg, o, nil)
	if err != nil {
		return err
	}
	defer closeOperator()
	log := mgr.GetLogger()
	log.Info("etcd-opstask controller starting", "namespace", o.namespace, "etcds", sortedKeys(o.etcds), "dryRun", o.dryRun)
	return mgr.Start(ctx)
}

// newScheme returns the scheme of the manager: core types and EtcdOpsTask.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	return scheme, errors.Join(corev1.AddToScheme(scheme), api.AddToScheme(scheme))
}

// addTaskController adds opstask's controller of the EtcdOpsTasks in
// o.namespace to mgr, as a Runnable that runs on every replica, and
// returns the function that closes the etcd clients once mgr stopped.
// adjust, when set, may change the controller's Config before it is
// built: the chaos tests wrap its handlers and store with recorders.
func addTaskController(mgr manager.Manager, cfg *rest.Config, o options, adjust func(*opstask.Config)) (closeFn func(), err error) {
	log := mgr.GetLogger()
	// Credentials are read from the API server when a bucket is opened, so
	// a rotated Secret is used by the next task, and no Secret is cached.
	op, err := newOperator(o, crt.Secrets(mgr.GetAPIReader()))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			op.close()
		}
	}()

	// kubestore lists tasks consistently from the API server when the
	// controller claims one; the manager's informer only tells it when to
	// look.
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	store, err := kubestore.New(kubestore.Config{
		Client:      dyn,
		Resource:    api.Resource,
		Kind:        "EtcdOpsTask",
		Namespace:   o.namespace,
		TargetField: api.TargetField,
	})
	if err != nil {
		return nil, err
	}
	metrics, err := taskMetrics()
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	ccfg := opstask.Config{
		Store:         crt.TaskStore(store, mgr.GetCache(), &api.EtcdOpsTask{}),
		Handlers:      op.kinds(),
		Metrics:       metrics,
		Identity:      host + "-" + rand.String(5), // run IDs tell replicas apart
		DefaultTTL:    o.defaultTTL,
		MaxConcurrent: o.maxConcurrent,
	}
	if adjust != nil {
		adjust(&ccfg)
	}
	ctl, err := opstask.New(ccfg)
	if err != nil {
		return nil, err
	}
	// The manager gives Runnables a context without its logger: opstask
	// logs through the one in its context.
	runTasks := func(ctx context.Context) error { return ctl.Run(ctrl.LoggerInto(ctx, log.WithName("opstask"))) }
	if err := mgr.Add(crt.EveryReplica(runTasks)); err != nil {
		return nil, err
	}
	return op.close, nil
}

// taskMetrics are the task metrics on controller-runtime's registry, which
// the manager serves on --metrics-bind-address. That registry is one per
// process, so these are too.
var taskMetrics = sync.OnceValues(func() (*opstask.Metrics, error) {
	return opstask.NewMetrics(opstask.MetricsConfig{Registerer: crmetrics.Registry, Prefix: "etcdopstask_", TargetLabel: "etcd", NamespaceLabel: "etcd_namespace"})
})

// newOperator returns the operator of the flags' etcd clusters and backup
// stores, reading bucket credentials from secrets. It refuses inconsistent
// flags, naming the flag and the value, before it connects anywhere.
func newOperator(o options, secrets backupstore.SecretGetter) (*operator, error) {
	op := &operator{targets: map[string]*Target{}, clock: clock.RealClock{}, dryRun: o.dryRun}
	op.openStore = func(ctx context.Context, namespace string, s api.StoreSpec) (*blob.Bucket, error) {
		scheme, err := providerScheme(s.Provider)
		if err != nil {
			return nil, err
		}
		var creds *backupstore.Credentials
		if s.SecretRef != "" {
			if creds, err = backupstore.LoadCredentials(ctx, secrets, namespace, s.SecretRef, scheme); err != nil {
				return nil, err
			}
		}
		rawURL := scheme + "://" + s.Container
		if s.Prefix != "" {
			rawURL += "?prefix=" + url.QueryEscape(s.Prefix)
		}
		return openBucket(ctx, rawURL, creds)
	}
	for _, name := range sortedKeys(o.backupStores) {
		if _, ok := o.etcds[name]; !ok {
			return nil, fmt.Errorf("--backup-store %s=%s: there is no --etcd %s to back up", name, o.backupStores[name], name)
		}
		if _, err := backupstore.Scheme(o.backupStores[name]); err != nil {
			return nil, fmt.Errorf("--backup-store %s=%s: %w", name, o.backupStores[name], err)
		}
	}
	for _, name := range sortedKeys(o.backupSecrets) {
		if _, ok := o.backupStores[name]; !ok {
			return nil, fmt.Errorf("--backup-secret %s=%s: there is no --backup-store for %s", name, o.backupSecrets[name], name)
		}
	}
	for _, name := range sortedKeys(o.etcds) {
		e, err := newEtcdCluster(strings.Split(o.etcds[name], ","))
		if err != nil {
			op.close()
			return nil, fmt.Errorf("--etcd %s=%s: %w", name, o.etcds[name], err)
		}
		t := &Target{Etcd: e}
		if rawURL, ok := o.backupStores[name]; ok {
			secret := o.backupSecrets[name]
			t.Backups = func(ctx context.Context) (*blob.Bucket, error) {
				if secret == "" {
					return openBucket(ctx, rawURL, nil)
				}
				scheme, _ := backupstore.Scheme(rawURL)
				creds, err := backupstore.LoadCredentials(ctx, secrets, o.namespace, secret, scheme)
				if err != nil {
					return nil, err
				}
				return openBucket(ctx, rawURL, creds)
			}
		}
		op.targets[name] = t
	}
	return op, nil
}

// close closes the etcd clients.
func (o *operator) close() {
	for _, t := range o.targets {
		if c, ok := t.Etcd.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// openBucket opens a bucket URL with the credentials, honouring gocloud's
// prefix= parameter, which backupstore.OpenBucket leaves to the caller when
// it builds the client from explicit credentials.
func openBucket(ctx context.Context, rawURL string, creds *backupstore.Credentials) (*blob.Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("bucket URL %q: %w", rawURL, err)
	}
	q := u.Query()
	prefix := q.Get("prefix")
	q.Del("prefix")
	u.RawQuery = q.Encode()
	b, err := backupstore.OpenBucket(ctx, u.String(), creds)
	if err != nil {
		return nil, err
	}
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix)
	}
	return b, nil
}

// namedFlag is a repeatable NAME=VALUE flag.
type namedFlag map[string]string

func (f namedFlag) String() string {
	var parts []string
	for _, k := range sortedKeys(f) {
		parts = append(parts, k+"="+f[k])
	}
	return strings.Join(parts, " ")
}

func (f namedFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" || value == "" {
		return fmt.Errorf("%q: want NAME=VALUE", s)
	}
	if _, dup := f[name]; dup {
		return fmt.Errorf("%q: %s given twice", s, name)
	}
	f[name] = value
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
