// Command etcd-opstask is etcd-druid's DEP-05 (operator out-of-band tasks)
// as a thin operator: a controller of EtcdOpsTask resources (package
// opstask, the CRD of opstask/exampleapi in deploy/crd.yaml) whose five task
// kinds act on real etcd clusters and object stores: on-demand full and delta
// snapshots uploaded with gocloud, compaction and defragmentation through the
// etcd maintenance API, a check of the snapshot chain, and copies of backups
// between stores (package backupstore). cmd/opstask is its CLI.
//
//	go run ./examples/etcd-opstask      # a simulated timeline, no cluster needed
//	go run ./examples/etcd-opstask --kubeconfig=$HOME/.kube/config \
//		--etcd main=http://127.0.0.1:2379 \
//		--backup-store 'main=s3://backups?region=eu-west-1&prefix=main/' --backup-secret main=backup-creds
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
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"gocloud.dev/blob"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
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
	metricsAddr   string
	dryRun        bool
}

func run(args []string) error {
	fs := flag.NewFlagSet("etcd-opstask", flag.ContinueOnError)
	var common kubecmd.Flags
	common.Register(fs, "elect one active replica (a Lease named etcd-opstask); others stand by")
	o := options{etcds: namedFlag{}, backupStores: namedFlag{}, backupSecrets: namedFlag{}}
	fs.Var(o.etcds, "etcd", "NAME=URL[,URL...]: the client URLs of the etcd that tasks name in spec.etcdName (repeatable)")
	fs.Var(o.backupStores, "backup-store", "NAME=BUCKET-URL: the backup bucket of etcd NAME, a gocloud URL (s3://, gs://, azblob://, file://); prefix=P puts its backups under P (repeatable)")
	fs.Var(o.backupSecrets, "backup-secret", "NAME=SECRET: the Secret, in --namespace, with the credentials of NAME's backup bucket (keys as in package backupstore); without it, the provider's ambient credentials (repeatable)")
	fs.DurationVar(&o.defaultTTL, "default-ttl", opstask.DefaultTTL, "how long a finished task is kept when its spec has no ttlSecondsAfterFinished")
	fs.IntVar(&o.maxConcurrent, "max-concurrent", opstask.DefaultMaxConcurrent, "executions at once, across etcd clusters (one at a time per cluster)")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0", `address of the /metrics endpoint, e.g. ":8080"; "0" turns it off`)
	fs.BoolVar(&o.dryRun, "dry-run", false, "do not compact or defragment: onDemandMaintenance tasks fail with code DryRun, saying what they would have done")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	cfg, err := common.RestConfig()
	if err != nil {
		return err
	}
	if cfg == nil {
		return runScenario(os.Stdout)
	}
	o.namespace = common.Namespace
	log, err := common.Logger()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = logr.NewContext(ctx, log)
	if !common.LeaderElect {
		return runController(ctx, cfg, o)
	}
	return kubecmd.Leading(ctx, cfg, o.namespace, "etcd-opstask", func(ctx context.Context) error {
		return runController(ctx, cfg, o)
	})
}

// runController runs the EtcdOpsTasks of one namespace until ctx ends.
func runController(ctx context.Context, cfg *rest.Config, o options) error {
	log := logr.FromContextOrDiscard(ctx)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	op := &operator{targets: map[string]*Target{}, clock: clock.RealClock{}, dryRun: o.dryRun}
	// Credentials are read when a bucket is opened, so a rotated Secret is
	// used by the next task.
	op.openStore = func(ctx context.Context, namespace string, s api.StoreSpec) (*blob.Bucket, error) {
		scheme, err := providerScheme(s.Provider)
		if err != nil {
			return nil, err
		}
		var creds *backupstore.Credentials
		if s.SecretRef != "" {
			if creds, err = backupstore.LoadCredentials(ctx, backupstore.SecretsFrom(cs.CoreV1()), namespace, s.SecretRef, scheme); err != nil {
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
			return fmt.Errorf("--backup-store %s=%s: there is no --etcd %s to back up", name, o.backupStores[name], name)
		}
	}
	for _, name := range sortedKeys(o.backupSecrets) {
		if _, ok := o.backupStores[name]; !ok {
			return fmt.Errorf("--backup-secret %s=%s: there is no --backup-store for %s", name, o.backupSecrets[name], name)
		}
	}
	for _, name := range sortedKeys(o.etcds) {
		e, err := newEtcdCluster(strings.Split(o.etcds[name], ","))
		if err != nil {
			return fmt.Errorf("--etcd %s=%s: %w", name, o.etcds[name], err)
		}
		defer e.Close()
		t := &Target{Etcd: e}
		if rawURL, ok := o.backupStores[name]; ok {
			if _, err := backupstore.Scheme(rawURL); err != nil {
				return fmt.Errorf("--backup-store %s=%s: %w", name, rawURL, err)
			}
			secret := o.backupSecrets[name]
			t.Backups = func(ctx context.Context) (*blob.Bucket, error) {
				if secret == "" {
					return openBucket(ctx, rawURL, nil)
				}
				scheme, _ := backupstore.Scheme(rawURL)
				creds, err := backupstore.LoadCredentials(ctx, backupstore.SecretsFrom(cs.CoreV1()), o.namespace, secret, scheme)
				if err != nil {
					return nil, err
				}
				return openBucket(ctx, rawURL, creds)
			}
		}
		op.targets[name] = t
	}

	store, err := kubestore.New(kubestore.Config{
		Client:      dyn,
		Resource:    api.Resource,
		Kind:        "EtcdOpsTask",
		Namespace:   o.namespace,
		TargetField: api.TargetField,
	})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	metrics, err := opstask.NewMetrics(reg, &opstask.MetricsOptions{Prefix: "etcdopstask_", TargetLabel: "etcd", NamespaceLabel: "etcd_namespace"})
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	c, err := opstask.New(opstask.Config{
		Store:         store,
		Kinds:         op.kinds(),
		Metrics:       metrics,
		Identity:      host,
		DefaultTTL:    o.defaultTTL,
		MaxConcurrent: o.maxConcurrent,
	})
	if err != nil {
		return err
	}
	if o.metricsAddr != "0" && o.metricsAddr != "" {
		srv := &http.Server{Addr: o.metricsAddr, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error(err, "metrics server failed", "address", o.metricsAddr)
			}
		}()
		defer srv.Close()
	}
	log.Info("etcd-opstask controller running", "namespace", o.namespace, "etcds", sortedKeys(o.etcds), "dryRun", o.dryRun)
	if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
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
