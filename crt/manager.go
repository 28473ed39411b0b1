package crt

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// EveryReplica returns run as a manager Runnable that the manager starts on
// every replica, leader or not (NeedLeaderElection is false): for an opstask
// Controller's Run, which is built to run on every replica at once (claims
// with leases decide which one executes a task), so that tasks wait for no
// election. A Runnable added with mgr.Add and no such method runs on the
// leader only.
func EveryReplica(run func(ctx context.Context) error) manager.Runnable { return everyReplica(run) }

type everyReplica func(ctx context.Context) error

func (r everyReplica) Start(ctx context.Context) error { return r(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

var _ manager.LeaderElectionRunnable = everyReplica(nil)

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
