package testenv

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// NewManager returns a controller-runtime manager on the control plane, for
// a test to add its controllers to and then start with [StartManager]. Its
// client reads through a cache of k.Namespace only, scheme must hold every
// type the test's controllers read, and it serves no metrics or probes, so
// that the managers of parallel tests do not fight over ports. Controller
// names are not checked for uniqueness across managers (controller-runtime
// checks them process-wide, which refuses a test run twice with -count).
// Each option
// function, if any, adjusts the options last.
func (k *Kubernetes) NewManager(t testing.TB, scheme *runtime.Scheme, opts ...func(*manager.Options)) manager.Manager {
	t.Helper()
	o := manager.Options{
		Scheme:                 scheme,
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{k.Namespace: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
	for _, opt := range opts {
		opt(&o)
	}
	mgr, err := manager.New(k.Config, o)
	if err != nil {
		t.Fatalf("testenv: new manager: %v", err)
	}
	return mgr
}

// StartManager starts mgr, waits until the informers it has started so far
// have synced, and stops it when the test ends, failing the test if Start
// returned an error. Informers start on first use: a test that reads a type
// before any controller watches it may ask for its informer first
// (mgr.GetCache().GetInformer).
func StartManager(t testing.TB, mgr manager.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("testenv: manager: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("testenv: manager did not stop within a minute")
		}
	})
	syncCtx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatal("testenv: manager cache did not sync within a minute")
	}
}
