package kubecmd

// Leading is the hand-made leader election the examples used before they
// ran on a controller-runtime manager; it goes once the last of them moved.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// The leader election timing: another replica may take the Lease over
// leaseDuration after it last saw it change; this one stops fn renewDeadline
// after the start of its last write that renewed it.

// errNotRenewed is the cause of fn's context canceled because the Lease was
// not renewed in time.
var errNotRenewed = errors.New("leader election: Lease not renewed within the renew deadline; stopped leading")

// Leading runs fn while this replica leads, through client-go's leader
// election on the Lease namespace/name, and returns fn's error. When fn
// returns, the replica steps down (the Lease is released). Leading returns
// an error if leadership is lost before ctx ends; it returns only after fn
// has returned.
//
// fn's context is canceled renewDeadline (10s) after the start of the last
// write that renewed the Lease, even while a renewal still hangs: client-go
// alone cancels it only after its renew loop gave up and, with
// ReleaseOnCancel, after its attempt to release the Lease, which can be
// later than leaseDuration (15s), when another replica may lead. As
// client-go's leader election, this is no fence: fn must honor its context.
func Leading(ctx context.Context, cfg *rest.Config, namespace, name string, fn func(context.Context) error) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	lock := &renewWatch{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: fmt.Sprintf("%s_%d", host, os.Getpid())},
	}}
	// client-go runs OnStartedLeading on its own goroutine and keeps
	// renewing until its context ends: end it when fn returns, and hand
	// fn's error over a channel.
	electionCtx, stepDown := context.WithCancel(ctx)
	defer stepDown()
	started := make(chan struct{})
	done := make(chan error, 1)
	leaderelection.RunOrDie(electionCtx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   leaseDuration,
		RenewDeadline:   renewDeadline,
		RetryPeriod:     retryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				close(started)
				fnCtx, cancel := context.WithCancelCause(ctx)
				go lock.guard(fnCtx, cancel)
				err := fn(fnCtx)
				if cause := context.Cause(fnCtx); errors.Is(cause, errNotRenewed) {
					if err == nil {
						err = cause
					} else {
						err = fmt.Errorf("%w: %w", cause, err)
					}
				}
				cancel(nil)
				done <- err
				stepDown()
			},
			OnStoppedLeading: func() {},
		},
	})
	select {
	case <-started:
	default:
		return nil // ctx ended before this replica led
	}
	runErr := <-done
	if runErr == nil && ctx.Err() == nil {
		runErr = errors.New("leader election lost")
	}
	return runErr
}

// renewWatch is the Lease lock, recording when the last write that made
// this replica the holder started: others count their lease from when they
// see that write, which is later.
type renewWatch struct {
	resourcelock.Interface

	mu        sync.Mutex
	confirmed time.Time
}

func (w *renewWatch) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return w.write(ctx, r, w.Interface.Create)
}

func (w *renewWatch) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return w.write(ctx, r, w.Interface.Update)
}

func (w *renewWatch) write(ctx context.Context, r resourcelock.LeaderElectionRecord, op func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	start := time.Now()
	err := op(ctx, r)
	if err == nil && r.HolderIdentity == w.Identity() {
		w.mu.Lock()
		if start.After(w.confirmed) {
			w.confirmed = start
		}
		w.mu.Unlock()
	}
	return err
}

// guard cancels fn's context, with cause errNotRenewed, renewDeadline after
// the start of the last write that confirmed this replica as the holder. It
// does not wait for a hanging write to return. It returns when ctx ends.
func (w *renewWatch) guard(ctx context.Context, cancel context.CancelCauseFunc) {
	for {
		w.mu.Lock()
		left := time.Until(w.confirmed.Add(renewDeadline))
		w.mu.Unlock()
		if left <= 0 {
			cancel(errNotRenewed)
			return
		}
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
