package crt

import (
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// QueueOn returns a controller queue whose delayed requeues follow clk, so
// that a test that steps a fake clock past a deadline sees the reconcile
// the last one asked for. With the real clock it is controller-runtime's
// classic rate-limited queue.
func QueueOn(clk clock.WithTicker) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(rl,
			workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name, Clock: clk})
	}
}
