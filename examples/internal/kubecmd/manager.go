package kubecmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The leader election timing, controller-runtime's defaults written out:
// another replica may take the Lease over leaseDuration after it last saw
// it change; the leader stops leading when it could not renew it for
// renewDeadline. As any leader election on a Lease, this is no fence: what
// the examples delete, they delete with preconditions, and what must never
// run twice at once is guarded by the packages themselves (opstask's
// claims, the locking package's lock), not by leadership.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// NewManager returns the controller-runtime manager of an example named
// name: its cache and client limited to f.Namespace, leader election on the
// Lease f.Namespace/name when --leader-elect (released when the manager
// stops, so a rolling update hands over at once), metrics on
// --metrics-bind-address and the /healthz and /readyz probes on
// --health-probe-bind-address. scheme must hold every type the example
// reads. Each option function, if any, adjusts the options last (tests
// use it to run two managers in one process).
func (f *Flags) NewManager(cfg *rest.Config, name string, scheme *runtime.Scheme, opts ...func(*manager.Options)) (manager.Manager, error) {
	o := manager.Options{
		Scheme:                        scheme,
		Cache:                         cache.Options{DefaultNamespaces: map[string]cache.Config{f.Namespace: {}}},
		LeaderElection:                f.LeaderElect,
		LeaderElectionID:              name,
		LeaderElectionNamespace:       f.Namespace,
		LeaderElectionResourceLock:    "leases",
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(leaseDuration),
		RenewDeadline:                 ptr.To(renewDeadline),
		RetryPeriod:                   ptr.To(retryPeriod),
		Metrics:                       metricsserver.Options{BindAddress: f.MetricsAddr},
		HealthProbeBindAddress:        f.ProbeAddr,
	}
	for _, opt := range opts {
		opt(&o)
	}
	mgr, err := manager.New(cfg, o)
	if err != nil {
		return nil, fmt.Errorf("%s: new manager: %w", name, err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	// Ready once the cache has synced: before that a replica would act on
	// an empty view.
	if err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("cache not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}
