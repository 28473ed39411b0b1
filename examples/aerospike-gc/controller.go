package main

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/crt/claims"
	"github.com/groundskeeper-io/groundskeeper/examples/aerospike-gc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// controllerOptions are the flags of the real controller.
type controllerOptions struct {
	namespace     string
	dryRun        bool
	retryAfter    time.Duration
	claimSelector string
}

// scheme holds the types the manager's client reads: Kubernetes' own and
// the backups.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(api.AddToScheme(scheme))
}

// report is what one pass did: of the backups (collect) or of the claims
// (lifecycle), at Now.
type report struct {
	Now     time.Time
	Claims  bool // a claim pass; else a backup pass
	Backups []collect.Outcome
	Claimed lifecycle.CollectResult
}

// setupCollector adds the collector's controllers to mgr:
//
//   - "aerospike-gc" (a backups.Collection) runs the backup pass over the
//     namespace whenever a backup changes, and when the next one expires
//     or a failed deletion is due again;
//   - "aerospike-gc-claims" (claims.Collector) runs the claim pass when a
//     claim or a pod comes or goes, and when the next claim expires; its
//     "-unmount" controller marks a claim unmounted when a pod that
//     mounted it is deleted (aerospike-operator's last-unmounted-on).
//
// clk is what the collector takes for now, in its decisions, its
// annotations and its requeues: the real clock in a cluster, a fake one in
// the e2e tests, which step it days ahead. onPass, if set, is called with
// the report of every pass.
func setupCollector(mgr ctrl.Manager, o controllerOptions, clk clock.WithTicker, onPass func(report)) error {
	selector, err := labels.Parse(o.claimSelector)
	if err != nil {
		return fmt.Errorf("--claim-selector %q: %w", o.claimSelector, err)
	}
	// Writes and cached reads through the manager's client; the reads that
	// must be fresh (a backup or a claim before it is acted on, pods before
	// a deletion, Secrets) through its API reader.
	claimClient := claims.Client(mgr.GetClient(), mgr.GetAPIReader())
	lc, err := lifecycle.New(lifecycle.Config{Client: claimClient, Clock: clk,
		Annotations: lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix}})
	if err != nil {
		return err
	}
	recorder := crt.Events(mgr.GetEventRecorder("aerospike-gc"))
	bc, err := collect.New(backupConfig(collect.Config[*api.AerospikeNamespaceBackup]{
		Objects: backups.Objects[*api.AerospikeNamespaceBackup](mgr.GetClient(), mgr.GetAPIReader()),
		Secrets: crt.Secrets(mgr.GetAPIReader()), Recorder: recorder, Clock: clk, DryRun: collect.DryRun{Enabled: o.dryRun}, RetryAfter: o.retryAfter,
	}))
	if err != nil {
		return err
	}
	if onPass == nil {
		onPass = func(report) {}
	}
	err = backups.Collection[*api.AerospikeNamespaceBackup]{Name: "aerospike-gc", Collector: bc, Clock: clk,
		OnPass: func(r collect.Report) { onPass(report{Now: r.Now, Backups: r.Backups}) }}.SetupWithManager(mgr)
	if err != nil {
		return err
	}
	scope := lifecycle.Scope{Namespace: o.namespace, Selector: selector,
		Claims: claims.Cache(mgr.GetClient()), Pods: claims.PodCache(mgr.GetClient())}
	return claims.Collector{
		UnmountTracker: claims.UnmountTracker{Lifecycle: lc, Claims: claimClient, Scope: scope, DryRun: o.dryRun},
		Name:           "aerospike-gc-claims", Recorder: recorder, Clock: clk,
		OnPass: func(start time.Time, r lifecycle.CollectResult) { onPass(report{Now: start, Claims: true, Claimed: r}) },
	}.SetupWithManager(mgr)
}
